/**
 * Kernel log excerpts shaped as /dev/kmsg records ("prio,seq,usec,flags;text"), with
 * the wording of the kernels berth runs on (the oom-kill summary since 4.19, the
 * legacy "Task in ... killed as a result of limit of ..." before it).
 */
let seq = 100;
const rec = (prio: number, usec: number, text: string): string =>
  `${prio},${seq++},${usec},-;${text}`;

/** The global OOM killer: no cgroup limit was hit (global_oom, no oom_memcg=). */
export const systemOom = (): string[] => [
  rec(
    4,
    5_000_000,
    'stress invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0',
  ),
  rec(4, 5_000_010, 'CPU: 1 UID: 0 PID: 4242 Comm: stress Not tainted 6.18.44 #1'),
  rec(6, 5_000_020, 'Mem-Info:'),
  rec(
    6,
    5_000_030,
    'oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice/session-1.scope,task=stress,pid=4243,uid=0',
  ),
  rec(
    3,
    5_000_040,
    'Out of memory: Killed process 4243 (stress) total-vm:1052836kB, anon-rss:1048712kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:2100kB oom_score_adj:0',
  ),
];

/** A container over its own memory limit (memcg OOM). */
export const containerOom = (): string[] => [
  rec(
    4,
    6_000_000,
    'python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=999',
  ),
  rec(6, 6_000_010, 'memory: usage 65536kB, limit 65536kB, failcnt 12'),
  rec(
    6,
    6_000_020,
    'oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-containerd-0123abcd.scope,mems_allowed=0,oom_memcg=/kubepods/burstable/pod1234/0123abcd,task_memcg=/kubepods/burstable/pod1234/0123abcd,task=python3,pid=5555,uid=0',
  ),
  rec(
    3,
    6_000_030,
    'Memory cgroup out of memory: Killed process 5555 (python3) total-vm:80000kB, anon-rss:65000kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:200kB oom_score_adj:999',
  ),
];

/** Before 4.19: the cgroups in a "Task in" line, the victim in "Killed process". */
export const legacyContainerOom = (): string[] => [
  rec(4, 7_000_000, 'app invoked oom-killer: gfp_mask=0x24000c0, order=0, oom_score_adj=0'),
  rec(6, 7_000_010, 'Task in /kubepods/pod77/abc killed as a result of limit of /kubepods/pod77'),
  rec(3, 7_000_020, 'Killed process 77 (app) total-vm:1000kB, anon-rss:500kB, file-rss:0kB'),
];

/** Before 4.19, a system OOM: no "Task in" line, so the victim cgroup stays "/". */
export const legacySystemOom = (): string[] => [
  rec(4, 8_000_000, 'java invoked oom-killer: gfp_mask=0x24201ca, order=0, oom_score_adj=0'),
  rec(3, 8_000_010, 'Out of memory: Kill process 88 (java) score 900 or sacrifice child'),
  rec(3, 8_000_020, 'Killed process 88 (java) total-vm:9000kB, anon-rss:8000kB, file-rss:0kB'),
];

/** Unrelated noise around the kills. */
export const noise = (): string[] => [
  rec(6, 1_000, 'eth0: link up'),
  rec(6, 2_000, 'Killed process 1 (init) mentioned outside an OOM report'),
];
