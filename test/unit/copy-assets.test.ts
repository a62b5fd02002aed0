/** The build's asset copy: the output's migrations are exactly the source's, nothing left behind. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

test('a migration removed or renamed in the source does not stay in the build, where migrate would apply it', () => {
  const out = mkdtempSync(path.join(tmpdir(), 'sb-assets-'));
  try {
    const migrations = path.join(out, 'shared/db/migrations');
    mkdirSync(migrations, { recursive: true });
    writeFileSync(path.join(migrations, '024_an_old_name.sql'), 'SELECT 1;');
    const run = spawnSync(process.execPath, ['scripts/copy-assets.mjs', out], { cwd: root, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(readdirSync(migrations).sort(), readdirSync(path.join(root, 'shared/db/migrations')).sort());
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
