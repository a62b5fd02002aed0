/** `npm start`'s rebuild rule (scripts/build-is-stale.sh), on a small tree of its own. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const script = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../scripts/build-is-stale.sh');

function stale(root: string): boolean {
  const run = spawnSync('bash', [script], { cwd: root, encoding: 'utf8' });
  assert.ok(run.status === 0 || run.status === 1, `exit ${run.status}: ${run.stderr}`);
  return run.status === 0;
}

function write(root: string, file: string, when: number): void {
  mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
  writeFileSync(path.join(root, file), '-- x\n');
  utimesSync(path.join(root, file), when, when);
}

test('rebuilt when the build is missing, a source is newer, or the migrations differ; not when current', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'sb-stale-'));
  try {
    const older = Date.now() / 1000 - 100;
    const built = older + 50;
    assert.equal(stale(root), true, 'no build at all');
    for (const m of ['001_init.sql', '002_more.sql']) {
      write(root, `shared/db/migrations/${m}`, older);
      write(root, `dist/shared/db/migrations/${m}`, built);
    }
    write(root, 'shared/engine/dispatch.ts', older);
    write(root, 'dist/bin/switchboard.js', built);
    assert.equal(stale(root), false, 'the build is newer than every source and has the same migrations');

    write(root, 'shared/engine/dispatch.ts', built + 10);
    assert.equal(stale(root), true, 'a source edited after the build');
    write(root, 'shared/engine/dispatch.ts', older);
    assert.equal(stale(root), false);

    unlinkSync(path.join(root, 'shared/db/migrations/002_more.sql'));
    assert.equal(stale(root), true, 'a checkout that only removed a migration: migrate would still apply the build\'s copy');
    unlinkSync(path.join(root, 'dist/shared/db/migrations/002_more.sql'));
    assert.equal(stale(root), false, 'once rebuilt, the migrations are the source\'s again');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
