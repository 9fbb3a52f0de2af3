import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CONFIG_DOC, configurationDoc } from '../../scripts/gen-config-doc.js';
import { SERVE_OPTION_TABLE } from '../../src/server/serve-options.js';

const committed = readFileSync(fileURLToPath(new URL(`../../${CONFIG_DOC}`, import.meta.url)), 'utf8');

describe('docs/configuration.md', () => {
  it('is what scripts/gen-config-doc.ts writes from the options table (npm run gen:config-doc)', async () => {
    expect(committed).toBe(await configurationDoc());
  });

  it('lists every option with its environment variable, file key and default', () => {
    for (const option of SERVE_OPTION_TABLE) {
      const line = committed.split('\n').find((l) => l.startsWith(`| \`${option.flag} `));
      expect(line, option.flag).toBeDefined();
      expect(line).toContain(`\`${option.env}\``);
      expect(line).toContain(option.fileKey === undefined ? '(not in the file)' : `\`${option.fileKey}\``);
      expect(line).toContain(option.default === undefined ? 'not set' : `\`${option.default}\``);
    }
  });
});
