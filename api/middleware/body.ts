/**
 * Request bodies are read raw and decoded here rather than by body-parser, so that every failure
 * (size, invalid UTF-8, bad JSON, duplicate keys, nesting) gets the answer of its own API family
 * instead of a generic 4xx/500.
 */
import type { Request } from 'express';
import { parseStrictJson } from '../../shared/strict-json.js';

export const MAX_BODY_BYTES = 256 * 1024;

export class BodyError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
    this.name = 'BodyError';
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Read the whole body (up to the limit) as bytes. */
export async function readRawBody(req: Request, limit = MAX_BODY_BYTES): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limit) {
    req.resume();
    throw new BodyError(413, `Request body too large (limit ${Math.round(limit / 1024)} KB)`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      req.resume();
      throw new BodyError(413, `Request body too large (limit ${Math.round(limit / 1024)} KB)`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
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

/** Parse an application/x-www-form-urlencoded body into a flat record (first value of each name wins). */
export async function readFormBody(req: Request, limit = MAX_BODY_BYTES): Promise<Record<string, string>> {
  const text = decodeUtf8(await readRawBody(req, limit));
  const out: Record<string, string> = {};
  for (const [name, value] of new URLSearchParams(text)) {
    if (!(name in out)) {
      out[name] = value;
    }
  }
  return out;
}
