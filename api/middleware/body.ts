/**
 * Request bodies are read raw and decoded here rather than by body-parser, so that every failure
 * (size, invalid UTF-8, bad JSON, duplicate keys, nesting) gets the answer of its own API family
 * instead of a generic 4xx/500.
 */
import type { Request } from 'express';
import { parseStrictJson } from '../../shared/strict-json.js';
import { charsetOf, formDecoder, parseForm, type ParsedForm } from './form.js';

export const MAX_BODY_BYTES = 256 * 1024;

/**
 * A body over its limit is still read (and dropped) up to this many bytes, so that the client,
 * which is usually still sending, gets to read the 400 instead of a broken pipe. Beyond it the
 * answer is sent and the connection dropped: reading gigabytes to be polite is not worth it.
 */
export const MAX_DISCARD_BYTES = 8 * 1024 * 1024;

/** The status of a request whose client went away before its body was read (nobody hears the answer). */
export const CLIENT_ABORTED = 499;

export class BodyError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
    this.name = 'BodyError';
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Read the whole body (up to the limit) as bytes. Over the limit: the rest is read and dropped
 * (up to `MAX_DISCARD_BYTES` in all), the answer closes the connection, and beyond that bound the
 * connection is dropped once the answer is written. A client that disconnects mid-body gives
 * `BodyError(CLIENT_ABORTED)`.
 */
export function readRawBody(req: Request, limit = MAX_BODY_BYTES): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? 0);
  const tooLarge = () => new BodyError(413, `Request body too large (limit ${Math.round(limit / 1024)} KB)`);
  // No answer may be kept alive after a body that was not read whole.
  const closeAfterAnswer = (drop: boolean) => {
    const res = req.res;
    if (res && !res.headersSent) {
      res.setHeader('Connection', 'close');
    }
    if (drop) {
      req.removeAllListeners('data');
      if (res && !res.writableFinished) {
        res.once('finish', () => req.socket.destroy());
        res.once('close', () => req.socket.destroy());
      } else {
        req.socket.destroy();
      }
    }
  };
  if (declared > MAX_DISCARD_BYTES) {
    closeAfterAnswer(true);
    return Promise.reject(tooLarge());
  }
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = declared > limit;
    let settled = false;
    const settle = (fn: () => void) => {
      if (!settled) {
        settled = true;
        // The error listener stays: a connection dropped later must not be an unhandled 'error'.
        req.off('data', onData).off('end', onEnd).off('close', onClose);
        fn();
      }
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_DISCARD_BYTES) {
        settle(() => {
          closeAfterAnswer(true);
          reject(tooLarge());
        });
        return;
      }
      if (!over && size > limit) {
        over = true;
        chunks.length = 0;
      }
      if (!over) {
        chunks.push(chunk);
      }
    };
    const onEnd = () => settle(() => {
      if (over) {
        closeAfterAnswer(false);
        reject(tooLarge());
      } else {
        resolve(Buffer.concat(chunks, size));
      }
    });
    const aborted = () => settle(() => reject(new BodyError(CLIENT_ABORTED, 'Client closed the connection before the body was read')));
    const onError = () => aborted();
    const onClose = () => {
      if (!req.complete) {
        aborted();
      }
    };
    if (req.readableEnded) {
      // Already consumed (never by our own routes; a body cannot be read twice).
      resolve(Buffer.alloc(0));
      return;
    }
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}

export function decodeUtf8(raw: Buffer): string {
  try {
    return utf8.decode(raw);
  } catch {
    throw new BodyError(400, 'Request body is not valid UTF-8');
  }
}

export function mediaType(req: Request): string {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
}

/** Parse a JSON body strictly: valid UTF-8, valid JSON, no duplicate keys, bounded depth. */
export async function readJsonBody(req: Request): Promise<unknown> {
  return (await readJsonDocument(req)).value;
}

/** The parsed body and the exact text of its message objects' payloads (the sending API returns them byte for byte). */
export async function readJsonDocument(req: Request): Promise<JsonDocument> {
  return parseJsonDocument(await readJsonBytes(req));
}

export interface JsonDocument {
  value: unknown;
  payloads: Array<string | undefined>;
}

/** The raw bytes of a JSON body (Content-Type checked), to be parsed by `parseJsonDocument` later. */
export async function readJsonBytes(req: Request): Promise<Buffer> {
  const type = mediaType(req);
  if (type !== 'application/json' && !type.endsWith('+json')) {
    req.resume();
    throw new BodyError(400, 'Content-Type must be application/json');
  }
  return readRawBody(req);
}

export function parseJsonDocument(raw: Buffer): JsonDocument {
  const text = decodeUtf8(raw);
  const parsed = parseStrictJson(text);
  if (!parsed.ok) {
    throw new BodyError(400, parsed.message);
  }
  return { value: parsed.value, payloads: parsed.payloads };
}

/**
 * Reads an application/x-www-form-urlencoded body: its fields (first value of each name), and the
 * first field whose bytes are not text in the form's character set (form.ts: UTF-8 unless the
 * Content-Type names another), which the caller refuses. A character set no form can be read in is
 * a BodyError.
 */
export async function readFormBody(req: Request, limit = MAX_BODY_BYTES): Promise<ParsedForm> {
  const decoder = formDecoder(charsetOf(req.headers['content-type']));
  if (typeof decoder === 'string') {
    req.resume();
    throw new BodyError(400, decoder);
  }
  return parseForm(await readRawBody(req, limit), decoder);
}
