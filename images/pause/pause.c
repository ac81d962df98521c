/*
 * berth's pause: the process that holds a pod sandbox's namespaces open. It does
 * nothing but wait; as PID 1 of a shared PID namespace it also reaps orphaned
 * children, and it exits 0 on SIGINT/SIGTERM so the runtime's stop is prompt.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("berth-pause 1.0");
    return 0;
  }
  if (getpid() != 1) fputs("pause: warning: not running as PID 1\n", stderr);
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0) {
    perror("pause: sigaction");
    return 1;
  }
  for (;;) pause();
}
