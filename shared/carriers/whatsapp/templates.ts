/**
 * The registered message templates of each WABA, as a sending process knows them: fetched from
 * Graph (`GET /{waba-id}/message_templates`, every page) with a sender's business token at most
 * once per `ttlMs` per WABA, shared by concurrent sends. A stale list is used while a fresh one
 * loads in the background; a WABA whose list cannot be read is asked again after `retryMs`, and
 * its sends go out without the cached shape (Meta then checks them itself). A template refusal
 * from Meta (it may have changed since the list was read) makes the next send read it again.
 */
import type { Logger } from '../../logger.js';
import type { GraphClient } from './graph.js';
import type { GraphTemplate } from './types.js';

export const TEMPLATE_CACHE_MS = 5 * 60_000;
const RETRY_AFTER_FAILURE_MS = 30_000;

interface Entry {
  templates: GraphTemplate[] | null;
  /** When `templates` was read, or when the last read failed. */
  at: number;
  loading: Promise<GraphTemplate[] | null> | null;
  stale: boolean;
}

export class TemplateCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly graph: Pick<GraphClient, 'listTemplates'>,
    private readonly logger: Logger,
    private readonly ttlMs = TEMPLATE_CACHE_MS,
    private readonly retryMs = RETRY_AFTER_FAILURE_MS,
  ) {}

  /** The WABA's templates, or null when they could not be read. */
  async get(wabaId: string, token: string, now = Date.now()): Promise<GraphTemplate[] | null> {
    let entry = this.entries.get(wabaId);
    if (!entry) {
      entry = { templates: null, at: 0, loading: null, stale: true };
      this.entries.set(wabaId, entry);
    }
    const fresh = !entry.stale && now - entry.at < (entry.templates ? this.ttlMs : this.retryMs);
    if (fresh) return entry.templates;
    const loading = entry.loading ?? this.load(wabaId, token, entry);
    // A list we have (even an old one) serves while the new one loads.
    return entry.templates ?? loading;
  }

  /** The next `get` reads the WABA's templates again (Meta refused a template send). */
  invalidate(wabaId: string): void {
    const entry = this.entries.get(wabaId);
    if (entry) entry.stale = true;
  }

  private load(wabaId: string, token: string, entry: Entry): Promise<GraphTemplate[] | null> {
    entry.loading = (async () => {
      try {
        entry.templates = await this.graph.listTemplates(wabaId, token);
      } catch (err) {
        // The token never appears in a GraphError's message.
        this.logger.warn({ wabaId, err: (err as Error).message }, 'WhatsApp templates could not be read; sending without the cached shapes');
      } finally {
        entry.at = Date.now();
        entry.stale = false;
        entry.loading = null;
      }
      return entry.templates;
    })();
    return entry.loading;
  }
}
