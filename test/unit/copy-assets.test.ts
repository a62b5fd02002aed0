/** The build's asset copy: the output's migrations are exactly the source's, nothing left behind. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

test('the source tree is refused as the output', () => {
  const run = spawnSync(process.execPath, ['scripts/copy-assets.mjs', '.'], { cwd: root, encoding: 'utf8' });
  assert.notEqual(run.status, 0);
  assert.match(run.stderr, /is the source tree/);
  assert.ok(readdirSync(path.join(root, 'shared/db/migrations')).length > 0);
});

test('a migration removed or renamed in the source does not stay in the build, where migrate would apply it', () => {
  const out = mkdtempSync(path.join(tmpdir(), 'sb-assets-'));
  try {
    const migrations = path.join(out, 'shared/db/migrations');
    mkdirSync(migrations, { recursive: true });
    writeFileSync(path.join(migrations, '024_an_old_name.sql'), 'SELECT 1;');
    writeFileSync(path.join(out, 'shared/db/pool.js'), '// compiled');
    const run = spawnSync(process.execPath, ['scripts/copy-assets.mjs', out], { cwd: root, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(readdirSync(migrations).sort(), readdirSync(path.join(root, 'shared/db/migrations')).sort());
    assert.deepEqual(readdirSync(path.join(out, 'shared/db')).sort(), ['migrations', 'pool.js'], 'nothing else of the output is touched');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
