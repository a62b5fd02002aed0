// ESLint (typescript-eslint): a small rule set of real defects, run by `npm run lint` (which
// `npm test` runs first). Layering and import cycles are checked by scripts/lint/check-imports.ts.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'types/**', '**/*.js', '**/*.mjs'] },
  { linterOptions: { reportUnusedDisableDirectives: 'off' } },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // A promise nobody awaits or handles is a crash (unhandled rejection) or a lost error.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      'no-constant-condition': ['error', { checkLoops: false }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      // Several checks look for control characters on purpose (NUL in text Postgres refuses, XML 1.0's forbidden range).
      'no-control-regex': 'off',
      // A variable set before a try and again inside it is clearer than the rule's alternative.
      'no-useless-assignment': 'off',
      curly: ['error', 'multi-line'],
    },
  },
  {
    files: ['test/**/*.ts', 'scripts/**/*.ts'],
    rules: {
      // node:test's test(), describe() and it() return promises the runner awaits.
      '@typescript-eslint/no-floating-promises': 'off',
      'preserve-caught-error': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
