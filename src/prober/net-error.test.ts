import assert from 'node:assert/strict';
import { createServer, connect, type AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { goNetErrorText, isPlaintextAnswer, joinHostPort, NetError } from './net-error.ts';

/** A Node system error as sockets raise them. */
function sysError(code: string, syscall: string, message = `${syscall} ${code}`): Error {
  return Object.assign(new Error(message), { code, syscall });
}

const remote = { host: '10.0.0.5', port: 8080 };

describe('goNetErrorText', () => {
  test('dial errors read as Go dial errors', () => {
    assert.equal(
      goNetErrorText(sysError('ECONNREFUSED', 'connect'), remote),
      'dial tcp 10.0.0.5:8080: connect: connection refused',
    );
    assert.equal(
      goNetErrorText(sysError('EHOSTUNREACH', 'connect'), remote),
      'dial tcp 10.0.0.5:8080: connect: no route to host',
    );
    assert.equal(
      goNetErrorText(sysError('ENETUNREACH', 'connect'), { host: 'fd00::5', port: 80 }),
      'dial tcp [fd00::5]:80: connect: network is unreachable',
    );
  });

  test('read and write errors name both ends when the local one is known', () => {
    assert.equal(
      goNetErrorText(sysError('ECONNRESET', 'read'), remote, { host: '10.0.0.1', port: 40000 }),
      'read tcp 10.0.0.1:40000->10.0.0.5:8080: read: connection reset by peer',
    );
    assert.equal(
      goNetErrorText(sysError('EPIPE', 'write'), remote),
      'write tcp 10.0.0.5:8080: write: broken pipe',
    );
  });

  test('a name that does not resolve, and a plain-text answer to TLS', () => {
    assert.equal(
      goNetErrorText(sysError('ENOTFOUND', 'getaddrinfo'), { host: 'nowhere.invalid', port: 80 }),
      'dial tcp: lookup nowhere.invalid: no such host',
    );
    const tls = Object.assign(new Error('ssl3_get_record:wrong version number'), {
      code: 'ERR_SSL_WRONG_VERSION_NUMBER',
    });
    assert.equal(isPlaintextAnswer(tls), true);
    assert.equal(goNetErrorText(tls, remote), 'http: server gave HTTP response to HTTPS client');
  });

  test('errors the table does not know keep their own message', () => {
    assert.equal(goNetErrorText(sysError('EWEIRD', 'connect', 'odd'), remote), 'odd');
    assert.equal(
      goNetErrorText(sysError('ECONNREFUSED', 'bind', 'bind failed'), remote),
      'bind failed',
    );
    assert.equal(goNetErrorText('text', remote), 'text');
    assert.equal(joinHostPort('::1', 1), '[::1]:1');
  });

  test('a real refused connection, wrapped with its cause', async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((r) =>
      server.close(() => {
        r();
      }),
    );
    const err = await new Promise<Error>((resolve) => {
      connect({ host: '127.0.0.1', port }).once('error', resolve);
    });
    const wrapped = new NetError(err, { host: '127.0.0.1', port });
    assert.equal(wrapped.message, `dial tcp 127.0.0.1:${port}: connect: connection refused`);
    assert.equal(wrapped.code, 'BERTH_NET_ERROR');
    assert.equal(wrapped.cause, err);
  });
});
