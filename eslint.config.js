// ESLint flat config: type-checked TypeScript rules, no import cycles, and a
// pure coordinator core (no sockets, timers, wall clock or randomness there).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';

/** Nothing imports the CLI (the entry points sit above everything). */
const NO_CLI = { group: ['**/cli/**'], message: 'Nothing imports cli.' };

/** `no-restricted-imports` with the CLI rule and more (a file gets one setting per rule). */
function restrictImports(...patterns) {
  return ['error', { patterns: [NO_CLI, ...patterns] }];
}

/**
 * Error codes are written once, in src/protocol/error-codes.ts: a code-like
 * string handed to an error, compared with a `.code`, or set as a `code`
 * field anywhere else is a second copy.
 */
// Node's own codes (ERR_*) and SQLite's (SQLITE_*) are not ours.
const CODE = '/^(?!ERR_|SQLITE_)[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$/';
const NO_CODE_LITERALS = [
  `NewExpression[callee.name=/Error$/] > Literal[value=${CODE}]`,
  `CallExpression[callee.type='Super'] > Literal[value=${CODE}]`,
  `BinaryExpression[operator=/^[!=]==$/][left.property.name='code'] > Literal[value=${CODE}]`,
  `Property[key.name='code'] > Literal[value=${CODE}]`,
].map((selector) => ({
  selector,
  message: 'Error codes live in src/protocol/error-codes.ts: use its constants.',
}));

/** What the core may not touch: it is pure, time and randomness are injected. */
const IMPURE_GLOBALS = [
  'setTimeout',
  'setInterval',
  'setImmediate',
  'clearTimeout',
  'clearInterval',
  'clearImmediate',
  'queueMicrotask',
  'process',
  'crypto',
  'performance',
  'fetch',
];

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'data/**',
      'demo-logs/**',
      // python/README.md's development environment, in the checkout.
      '.venv/**',
      'eslint.config.js',
      // Build configuration (type-checked by ui/tsconfig.json).
      'ui/vite.config.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    settings: { 'import-x/resolver': { node: { extensions: ['.ts', '.js'] } } },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: [
                'describe',
                'it',
                'test',
                'suite',
                'before',
                'after',
                'beforeEach',
                'afterEach',
              ],
            },
          ],
        },
      ],
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'import-x/no-cycle': 'error',
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/cli/**'],
    rules: { 'no-restricted-imports': restrictImports() },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/protocol/error-codes.ts', 'src/coordinator/core/**'],
    rules: { 'no-restricted-syntax': ['error', ...NO_CODE_LITERALS] },
  },
  {
    // The core is pure: it may import only itself (a flat folder), protocol/
    // and store *types* (and node:util's isDeepStrictEqual, a pure function).
    files: ['src/coordinator/core/**/*.ts'],
    rules: {
      'no-restricted-imports': restrictImports(
        {
          regex: '^(?!\\./[^/]+$|\\.\\./\\.\\./protocol/[^/]+$|\\.\\./\\.\\./store/|node:util$)',
          message: 'The core is pure: it imports only itself, protocol/ and store types.',
        },
        {
          regex: '^\\.\\./\\.\\./store/',
          allowTypeImports: true,
          message: 'The core imports store types only: its writes and reads leave as data.',
        },
        {
          regex: '^node:util$',
          allowImportNames: ['isDeepStrictEqual'],
          message: 'The core is pure: of node:util only isDeepStrictEqual.',
        },
      ),
      'no-restricted-globals': [
        'error',
        ...IMPURE_GLOBALS.map((name) => ({
          name,
          message: 'The core is pure: no timers, clock, randomness or process; inject it.',
        })),
      ],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'Use the injected clock.' },
        { object: 'Math', property: 'random', message: 'Use the injected random source.' },
      ],
      'no-restricted-syntax': [
        'error',
        ...NO_CODE_LITERALS,
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'Use the injected clock.',
        },
      ],
    },
  },
  {
    // The shell never imports the HTTP side or what assembles it (server/);
    // the package entry (index.ts) re-exports the assembly.
    files: ['src/coordinator/**/*.ts'],
    ignores: ['src/coordinator/core/**', 'src/coordinator/index.ts'],
    rules: {
      'no-restricted-imports': restrictImports({
        group: ['**/http/**', '**/server/**', '**/worker/**', '**/client/**'],
        message:
          'The coordinator does not import http/, server/, worker/ or client/: http/ depends on it (coordinator/view.ts).',
      }),
    },
  },
  {
    // The HTTP side sees the coordinator through its view only.
    files: ['src/http/**/*.ts'],
    rules: {
      'no-restricted-imports': restrictImports(
        {
          regex: '^\\.\\./coordinator/(?!view\\.js$)',
          message: 'http/ depends on the coordinator through coordinator/view.ts only.',
        },
        {
          regex: '^\\.\\./coordinator/view\\.js$',
          allowTypeImports: true,
          message: 'http/ imports the coordinator view as types only.',
        },
        { group: ['**/server/**'], message: 'http/ does not import what assembles it.' },
      ),
    },
  },
  {
    files: ['src/store/**/*.ts', 'src/net/**/*.ts', 'src/common/**/*.ts', 'src/tasks/**/*.ts'],
    rules: {
      'no-restricted-imports': restrictImports({
        group: ['**/coordinator/**', '**/http/**', '**/server/**', '**/worker/**', '**/client/**'],
        message: 'A lower layer does not import the programs built on it.',
      }),
    },
  },
  {
    files: ['src/protocol/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['../*'], message: 'protocol imports nothing else of ours.' }] },
      ],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
    },
  },
  {
    files: ['**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      parserOptions: { projectService: false, project: null },
      globals: { process: 'readonly', console: 'readonly' },
    },
  },
);
