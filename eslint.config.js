// Type-aware lint: the async mistakes that turn into silent stalls in a daemon.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'src/cri/gen/**',
      'src/csi/gen/**',
      'src/pluginmanager/gen/**',
      '.demo/**',
      '.cache/**',
      '.build/**',
      '.build.tmp-*/**',
    ],
  },
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        // node:test's describe/test return promises the runner itself awaits.
        {
          allowForKnownSafeCalls: [
            { from: 'package', name: ['describe', 'test', 'it', 'suite'], package: 'node:test' },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowBoolean: true, allowNullish: false, allowRegExp: false },
      ],
      'no-restricted-properties': [
        'error',
        {
          object: 'describe',
          property: 'only',
          message: 'A focused test hides the rest of the suite.',
        },
        {
          object: 'test',
          property: 'only',
          message: 'A focused test hides the rest of the suite.',
        },
        { object: 'it', property: 'only', message: 'A focused test hides the rest of the suite.' },
      ],
    },
  },
  {
    // node:assert's strict asserts narrow types, so the optional chains that follow an
    // assertion read as "unnecessary"; in tests they are what keeps a failure readable.
    files: ['test/**/*.ts', 'src/**/*.test.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-unnecessary-condition': 'off' },
  },
  {
    files: ['eslint.config.js', '.dependency-cruiser.cjs'],
    ...tseslint.configs.disableTypeChecked,
  },
);
