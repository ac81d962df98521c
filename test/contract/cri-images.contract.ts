/**
 * Contract: pulling from an authenticated registry (typed errors for refused
 * credentials and missing images), and the image store's answers.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CriNotFoundError, CriUnauthenticatedError } from '../../src/cri/index.ts';
import type { RuntimeRef } from './cri-runtime.contract.ts';

/** Registers the ImageService tests. */
export function imageContract(rt: RuntimeRef): void {
  test('a pull with wrong credentials is a typed authentication error', async () => {
    const { client, images, credentials } = rt();
    await assert.rejects(
      client.image.pullImage({
        image: { image: images.busybox },
        auth: { username: credentials.username, password: 'wrong-password' },
      }),
      (err: unknown) => {
        assert.ok(err instanceof CriUnauthenticatedError, String(err));
        assert.equal(err.code, 'BERTH_CRI_UNAUTHENTICATED');
        assert.equal(err.method, 'ImageService/PullImage');
        // The caller's stack survives the answer arriving later.
        assert.match(err.stack ?? '', /cri-images\.contract\.ts/);
        return true;
      },
    );
  });

  test('a pull without credentials is refused the same way', async () => {
    const { client, images } = rt();
    await assert.rejects(
      client.image.pullImage({ image: { image: images.busybox } }),
      CriUnauthenticatedError,
    );
  });

  test('a missing image is a typed not-found error', async () => {
    const { client, missingImage, credentials } = rt();
    await assert.rejects(
      client.image.pullImage({ image: { image: missingImage }, auth: { ...credentials } }),
      (err: unknown) => err instanceof CriNotFoundError,
    );
  });

  test('a pull answers the image id, again when present and with base64 auth', async () => {
    const { client, images, credentials } = rt();
    const first = await client.image.pullImage({
      image: { image: images.busybox },
      auth: { ...credentials },
    });
    assert.match(first.imageRef, /^sha256:[0-9a-f]{64}$/);
    const again = await client.image.pullImage({
      image: { image: images.busybox },
      auth: { ...credentials },
    });
    assert.equal(again.imageRef, first.imageRef);
    const basic = Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64');
    const viaAuth = await client.image.pullImage({
      image: { image: images.busybox },
      auth: { auth: basic },
    });
    assert.equal(viaAuth.imageRef, first.imageRef);

    const byRef = await client.image.imageStatus({ image: { image: images.busybox } });
    assert.equal(byRef.image?.id, first.imageRef);
    assert.ok(byRef.image.repoTags.includes(images.busybox), byRef.image.repoTags.join());
    const repository = images.busybox.replace(/:[^:/]+$/, '');
    assert.ok(
      byRef.image.repoDigests.some((d) => d.startsWith(`${repository}@sha256:`)),
      byRef.image.repoDigests.join(),
    );
    assert.ok(byRef.image.size > 0n);
    const byId = await client.image.imageStatus({ image: { image: first.imageRef } });
    assert.equal(byId.image?.id, first.imageRef);
    const { images: all } = await client.image.listImages({});
    assert.ok(all.some((i) => i.id === first.imageRef));
  });

  test('an image that is not there: ImageStatus has none, RemoveImage succeeds', async () => {
    const { client, missingImage } = rt();
    const status = await client.image.imageStatus({ image: { image: missingImage } });
    assert.equal(status.image, undefined);
    await client.image.removeImage({ image: { image: missingImage } });
  });

  test('RemoveImage removes the image, and it can be pulled again', async () => {
    const { client, images, credentials } = rt();
    const pull = (): Promise<{ imageRef: string }> =>
      client.image.pullImage({ image: { image: images.busybox }, auth: { ...credentials } });
    const { imageRef } = await pull();
    await client.image.removeImage({ image: { image: images.busybox } });
    const status = await client.image.imageStatus({ image: { image: images.busybox } });
    assert.equal(status.image, undefined);
    const { images: all } = await client.image.listImages({});
    assert.ok(!all.some((i) => i.id === imageRef));
    assert.equal((await pull()).imageRef, imageRef);
  });

  test('ImageFsInfo reports the image filesystem', async () => {
    const { imageFilesystems } = await rt().client.image.imageFsInfo({});
    const fs = imageFilesystems[0];
    assert.ok(fs !== undefined, 'an image filesystem');
    assert.notEqual(fs.fsId?.mountpoint ?? '', '');
    assert.ok(fs.timestamp > 0n);
    assert.ok(fs.usedBytes !== undefined);
  });
}
