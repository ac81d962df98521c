/** The KmsgSource contract, run by the fake and, where it can be opened, /dev/kmsg. */
import { access, constants } from 'node:fs/promises';
import { FakeKmsgSource } from './fake.ts';
import { kmsgSourceContract } from './contract.ts';
import { DevKmsgSource } from './kmsg.ts';

let seq = 0;
kmsgSourceContract('FakeKmsgSource', () => {
  const source = new FakeKmsgSource();
  return Promise.resolve({
    source,
    produce: () => {
      seq++;
      source.push(`6,${seq},${seq * 1000},-;fake record ${seq}`);
    },
  });
});

const readable = await access('/dev/kmsg', constants.R_OK).then(
  () => true,
  () => false,
);
if (readable) {
  // The live ring buffer always holds records (boot messages at least).
  kmsgSourceContract('DevKmsgSource', () =>
    Promise.resolve({ source: new DevKmsgSource(), produce: () => undefined }),
  );
}
