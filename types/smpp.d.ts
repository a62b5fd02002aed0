/**
 * Minimal ambient types for `smpp` 0.5.1 (farhadi/node-smpp), covering only what switchboard uses.
 * The package is CommonJS (`module.exports = { Session, Server, PDU, connect, createServer, ... }`),
 * so import it as a default import: `import smpp from 'smpp'`.
 *
 * Decoded PDUs carry their fields as own properties whose shape depends on the command and on the
 * library's decode filters, so field access is `unknown` and must be narrowed by the caller.
 */
declare module 'smpp' {
  import { EventEmitter } from 'node:events';
  import type { Server as NetServer, Socket } from 'node:net';

  namespace smpp {
    /** Field values accepted when building a PDU (mandatory parameters and named TLVs). */
    type PduFieldValue =
      | number
      | string
      | Buffer
      | Date
      | null
      | { udh?: Buffer; message: Buffer | string };

    type PduFields = { [field: string]: PduFieldValue | undefined };

    class PDU {
      constructor(command: string, options?: PduFields);
      /** Command name (`submit_sm`, `deliver_sm_resp`, ... or `unknown`). */
      command: string;
      command_length: number;
      command_id: number;
      command_status: number;
      sequence_number: number;
      /** Decoded parameters and TLVs (unknown TLVs appear under their numeric tag as Buffers). */
      [field: string]: unknown;
      isResponse(): boolean;
      /** Builds the matching `*_resp` (or `generic_nack` for unknown commands) with this sequence number. */
      response(options?: PduFields): PDU;
      toBuffer(): Buffer;
      static fromBuffer(buffer: Buffer): PDU | false;
      static maxLength: number;
    }

    type ResponseCallback = (pdu: PDU) => void;

    interface SessionOptions {
      /** An already connected (or connecting) socket; when given no connection is made. */
      socket?: Socket;
      host?: string;
      port?: number;
      tls?: boolean;
      auto_enquire_link_period?: number;
      url?: string;
    }

    class Session extends EventEmitter {
      constructor(options: SessionOptions);
      readonly socket: Socket;
      sequence: number;
      paused: boolean;
      /** Set on server-side sessions. */
      server?: Server;
      /** Returns false (and never calls back) when the socket is not writable. */
      send(pdu: PDU, responseCallback?: ResponseCallback, sendCallback?: ResponseCallback): boolean;
      pause(): void;
      resume(): void;
      /** socket.end() */
      close(callback?: () => void): void;
      /** socket.destroy() */
      destroy(callback?: () => void): void;
      bind_transceiver(options: PduFields, responseCallback?: ResponseCallback): boolean;
      bind_transmitter(options: PduFields, responseCallback?: ResponseCallback): boolean;
      bind_receiver(options: PduFields, responseCallback?: ResponseCallback): boolean;
      submit_sm(options: PduFields, responseCallback?: ResponseCallback): boolean;
      deliver_sm(options: PduFields, responseCallback?: ResponseCallback): boolean;
      enquire_link(options?: PduFields, responseCallback?: ResponseCallback): boolean;
      unbind(options?: PduFields, responseCallback?: ResponseCallback): boolean;
    }

    interface Server extends NetServer {
      readonly sessions: Session[];
      on(event: 'session', listener: (session: Session) => void): this;
      on(event: string, listener: (...args: any[]) => void): this;
    }

    interface ServerOptions {
      key?: string | Buffer;
      cert?: string | Buffer;
    }

    function connect(url: string | SessionOptions, listener?: () => void): Session;
    function createServer(options: ServerOptions, listener?: (session: Session) => void): Server;
    function createServer(listener?: (session: Session) => void): Server;
  }

  export = smpp;
}
