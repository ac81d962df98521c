/**
 * The registration service of one plugin socket, on the same HTTP/2 unary channel as
 * the CSI client. Deadlines as upstream's operation generator: GetInfo 1 s (it also
 * covers connecting), NotifyRegistrationStatus 5 s.
 */
import {
  abortErrorOf,
  callUnary,
  DEFAULT_MAX_MESSAGE_BYTES,
  H2UnaryChannel,
} from '../csi/unary.ts';
import { RegistrationService } from './gen/pluginregistration/v1/api.ts';
import type { PluginInfo, RegistrationClient } from './types.ts';

export const GET_INFO_TIMEOUT_MS = 1_000;
export const NOTIFY_TIMEOUT_MS = 5_000;

export class GrpcRegistrationClient implements RegistrationClient {
  readonly socketPath: string;
  readonly #channel: H2UnaryChannel;

  constructor(socketPath: string) {
    this.socketPath = socketPath;
    this.#channel = new H2UnaryChannel(socketPath, { maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES });
  }

  async getInfo(signal: AbortSignal): Promise<PluginInfo> {
    const info = await callUnary(
      this.#channel,
      RegistrationService.getInfo,
      {},
      signal,
      GET_INFO_TIMEOUT_MS,
    );
    return {
      type: info.type,
      name: info.name,
      endpoint: info.endpoint,
      supportedVersions: info.supportedVersions,
    };
  }

  async notifyRegistrationStatus(
    registered: boolean,
    error: string,
    signal: AbortSignal,
  ): Promise<void> {
    if (signal.aborted) throw abortErrorOf('NotifyRegistrationStatus', signal);
    await callUnary(
      this.#channel,
      RegistrationService.notifyRegistrationStatus,
      { pluginRegistered: registered, error },
      signal,
      NOTIFY_TIMEOUT_MS,
    );
  }

  close(): void {
    this.#channel.close();
  }
}
