// @ts-check
import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';

const NATIVE_ADDON = {
  name: 'zookeeper',
  message: 'only src/server/stores/zookeeper loads the native addon',
};

/**
 * A lint block that keeps `files` from importing gRPC, generated code, the native addon (unless
 * `ignores` spares the ZooKeeper store) and the named server folders. One block per file set:
 * a later block setting the same rule would replace this one.
 */
function boundary(files, forbiddenFolders, ignores = []) {
  return [
    {
      files,
      ignores,
      rules: {
        'no-restricted-imports': [
          'error',
          {
            paths: [NATIVE_ADDON],
            patterns: [
              { group: ['@grpc/*'], message: 'only src/server/transport and src/client speak gRPC' },
              {
                group: ['**/gen/**'],
                message: 'only src/server/transport and src/client use generated code',
              },
              ...forbiddenFolders.map((folder) => ({
                group: [`**/${folder}/**`],
                message: `dependencies point transport -> engine -> stores: not to ${folder}/ from here`,
              })),
            ],
          },
        ],
      },
    },
  ];
}

export default tseslint.config(
  { ignores: ['dist/', 'packages/*/dist/', 'src/gen/', 'node_modules/', 'bench/results/'] },
  eslint.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A forgotten promise here is a lock nobody releases.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      // Methods are async to satisfy interfaces (CoordinationStore) whether or not they await.
      '@typescript-eslint/require-await': 'off',
      // `using _subscription = ...` holds a resource for its scope without reading it.
      '@typescript-eslint/no-unused-vars': ['error', { varsIgnorePattern: '^_', argsIgnorePattern: '^_' }],
      // Rejecting with an AbortSignal's reason (typed any) is the point of a signal.
      '@typescript-eslint/prefer-promise-reject-errors': [
        'error',
        { allowThrowingAny: true, allowThrowingUnknown: true },
      ],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-restricted-syntax': [
        'error',
        {
          selector: "CallExpression[callee.object.name=/^(it|describe|test)$/][callee.property.name='only']",
          message: 'no .only in committed tests',
        },
      ],
    },
  },
  // The architecture's boundaries: dependencies point one way, transport -> engine -> stores,
  // and every server layer may use src/server/lock-error.ts (which imports nothing). The engine
  // knows neither gRPC nor ZooKeeper, and only the ZooKeeper store loads the native addon.
  {
    files: ['src/**/*.ts'],
    ignores: ['src/server/stores/zookeeper/**'],
    rules: { 'no-restricted-imports': ['error', { paths: [NATIVE_ADDON] }] },
  },
  ...boundary(['src/server/engine/**/*.ts'], ['transport', 'observability', 'security']),
  {
    // The layers above the engine see its public face only (src/server/engine/index.ts).
    files: [
      'src/server/transport/**/*.ts',
      'src/server/observability/**/*.ts',
      'src/server/security/**/*.ts',
      'src/server/main.ts',
    ],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [NATIVE_ADDON],
          patterns: [
            {
              group: ['**/engine/*', '!**/engine/index.js'],
              message: 'outside the engine, import it from engine/index.js (its public face) only',
            },
          ],
        },
      ],
    },
  },
  ...boundary(
    ['src/server/stores/**/*.ts'],
    ['engine', 'transport', 'observability', 'security'],
    ['src/server/stores/zookeeper/**'],
  ),
  {
    // The ZooKeeper store: the same boundaries, and the native addon is its own.
    files: ['src/server/stores/zookeeper/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: ['engine', 'transport', 'observability', 'security'].map((folder) => ({
            group: [`**/${folder}/**`],
            message: `dependencies point transport -> engine -> stores: not to ${folder}/ from here`,
          })),
        },
      ],
    },
  },
  {
    // The SDK stands on its own: generated stubs and src/common, never the server.
    files: ['src/client/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [NATIVE_ADDON],
          patterns: [
            { group: ['**/server/**'], message: 'the client SDK depends on src/common only, not the server' },
          ],
        },
      ],
    },
  },
  {
    // lockstream/fencing stands on its own: grpc-js and node: only. Not the server, the client or
    // generated code; and `pg` never, not even its types, so the published declarations work for
    // users who have no PostgreSQL (the adapter takes the caller's client, typed structurally).
    files: ['src/fencing/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            NATIVE_ADDON,
            { name: 'pg', message: "lockstream/fencing/postgres takes the caller's client: no import of pg" },
          ],
          patterns: [
            {
              group: ['**/server/**', '**/client/**', '**/common/**'],
              message: 'src/fencing imports nothing of lockstream',
            },
            { group: ['**/gen/**'], message: 'src/fencing uses no generated code' },
            {
              group: ['pg/*', '@types/pg'],
              message: "lockstream/fencing/postgres takes the caller's client: no import of pg",
            },
          ],
        },
      ],
    },
  },
  ...boundary(
    ['src/common/**/*.ts', 'src/server/lock-error.ts'],
    ['engine', 'stores', 'transport', 'observability', 'security'],
  ),
  {
    // Asymmetric matchers (expect.stringMatching) are typed any.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-unsafe-assignment': 'off' },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
  },
);
