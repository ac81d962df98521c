/**
 * A TCP forwarder run as its own process (so a detached cluster keeps it after the Node
 * process that started it exits):
 *   node tcp-forward.ts <listen-host> <listen-port> <target-host> <target-port>
 * The harness uses it to expose the loopback-only kube-apiserver on the pod bridge's
 * gateway address, which exists only on this machine, for the kubernetes Service.
 * It prints "listening" once bound, so the starter can wait for that line.
 */
import { connect, createServer } from 'node:net';

const [listenHost, listenPort, targetHost, targetPort] = process.argv.slice(2);
if (
  listenHost === undefined ||
  listenPort === undefined ||
  targetHost === undefined ||
  targetPort === undefined
) {
  process.stderr.write(
    'usage: tcp-forward.ts <listen-host> <listen-port> <target-host> <target-port>\n',
  );
  process.exit(2);
}

const server = createServer((client) => {
  const upstream = connect({ host: targetHost, port: Number(targetPort) });
  // Either side failing closes both: a half-dead pair would hang the pod's client.
  const close = (): void => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close);
  upstream.on('error', close);
  client.on('close', close);
  upstream.on('close', close);
  client.pipe(upstream);
  upstream.pipe(client);
});
server.on('error', (err) => {
  process.stderr.write(`tcp-forward: ${err.message}\n`);
  process.exit(1);
});
server.listen({ host: listenHost, port: Number(listenPort) }, () => {
  process.stdout.write(`listening on ${listenHost}:${listenPort} -> ${targetHost}:${targetPort}\n`);
});
process.on('SIGTERM', () => {
  server.close();
  process.exit(0);
});
