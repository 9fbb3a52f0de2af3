// @ts-check
import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'src/gen/', 'node_modules/', 'bench/results/'] },
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
  {
    // The architecture's boundaries: the engine knows neither gRPC nor ZooKeeper, and only the
    // ZooKeeper store loads the native addon.
    files: ['src/server/engine/**/*.ts', 'src/server/stores/**/*.ts', 'src/common/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['@grpc/*'], message: 'only src/server/transport and src/client speak gRPC' },
            { group: ['**/gen/**'], message: 'only src/server/transport and src/client use generated code' },
            { group: ['**/transport/**'], message: 'dependencies point transport -> engine -> stores' },
          ],
        },
      ],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/server/stores/zookeeper/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'zookeeper', message: 'only src/server/stores/zookeeper loads the native addon' }],
        },
      ],
    },
  },
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
