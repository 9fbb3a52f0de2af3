/*
 * The deployment files agree with the server they deploy: every setting in the image's, the
 * chart's and the systemd example's lockstream.yaml is a `lockstream serve` option with a valid
 * value (checked by the server's own loadConfig, as the same flags), the ports the Dockerfile
 * exposes and probes are the ones its configuration opens, the chart's probes ask the named HTTP
 * port, and the stop timeouts cover a SIGTERM hand-over. Files only: scripts/check-deploy.sh
 * renders and validates the chart itself.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/server/config.js';
import { serveOptions } from '../../src/server/serve-options.js';
import { checkedBlock, consoleCommands } from '../support/doc-blocks.js';

const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const yamlOf = (path: string): Record<string, unknown> => parse(read(path)) as Record<string, unknown>;

const CHART = 'deploy/helm/lockstream';
const values = yamlOf(`${CHART}/values.yaml`) as {
  ports: { grpc: number; http: number };
  config: Record<string, unknown>;
  probes: Record<'startup' | 'liveness' | 'readiness', { path: string }>;
  preStopSleepSeconds: number;
  terminationGracePeriodSeconds: number | null;
};
const ciValues = yamlOf(`${CHART}/ci/production-values.yaml`) as { config: Record<string, unknown> };

/** The keys a configuration file may hold: the long flags of `serve`, without their dashes. */
const FILE_KEYS = new Set(serveOptions({}).map((option) => String(option.long).replace(/^--/, '')));

/** A configuration file's settings, parsed by the server as the same flags would be. */
function configOf(settings: Record<string, unknown>): ReturnType<typeof loadConfig> {
  const argv = Object.entries(settings).flatMap(([key, value]) => [`--${key}`, String(value)]);
  return loadConfig({}, argv);
}

/** The chart's lockstream.yaml with the default values: its own keys, then `config`. */
function chartConfig(config: Record<string, unknown>): Record<string, unknown> {
  return {
    host: '0.0.0.0',
    port: values.ports.grpc,
    'http-host': '0.0.0.0',
    'http-port': values.ports.http,
    ...config,
  };
}

describe('the configuration files of the image, the chart and the systemd unit', () => {
  const files: ReadonlyArray<[string, Record<string, unknown>]> = [
    ['deploy/docker/lockstream.yaml', yamlOf('deploy/docker/lockstream.yaml')],
    ['deploy/systemd/lockstream.yaml', yamlOf('deploy/systemd/lockstream.yaml')],
    [`${CHART} default values`, chartConfig(values.config)],
    [`${CHART} ci/production-values.yaml`, chartConfig(ciValues.config)],
  ];

  it.each(files)('%s: every key is a serve option, and the server accepts every value', (_, settings) => {
    expect(Object.keys(settings).filter((key) => !FILE_KEYS.has(key))).toEqual([]);
    expect(() => configOf(settings)).not.toThrow();
  });

  it("the chart's ConfigMap writes only serve options (the files it mounts included)", () => {
    const keys = [...read(`${CHART}/templates/configmap.yaml`).matchAll(/^ {4}([a-z][a-z-]*):/gm)].map(
      (match) => match[1]!,
    );
    expect(keys).toEqual(expect.arrayContaining(['host', 'port', 'http-host', 'http-port']));
    expect(keys.filter((key) => !FILE_KEYS.has(key))).toEqual([]);
  });

  it('every configuration listens beyond loopback, with the HTTP port on', () => {
    for (const [, settings] of files) {
      const config = configOf(settings);
      expect(config.host).toBe('0.0.0.0');
      expect(config.httpHost).toBe('0.0.0.0');
      expect(config.httpPort).toBeGreaterThan(0);
    }
  });
});

describe('ports and probes', () => {
  const dockerfile = read('Dockerfile');
  const imageConfig = (): ReturnType<typeof loadConfig> => configOf(yamlOf('deploy/docker/lockstream.yaml'));

  it("the Dockerfile exposes the image configuration's gRPC and HTTP ports and probes /livez there", () => {
    const image = imageConfig();
    expect(dockerfile).toMatch(new RegExp(`^EXPOSE ${image.port} ${image.httpPort}$`, 'm'));
    expect(dockerfile).toContain(`fetch('http://127.0.0.1:${image.httpPort}/livez')`);
    expect(dockerfile).toMatch(/^CMD \["serve", "--config", "\/etc\/lockstream\/lockstream.yaml"\]$/m);
    expect(dockerfile).toContain('COPY deploy/docker/lockstream.yaml /etc/lockstream/lockstream.yaml');
  });

  it('the chart uses the same ports as the image, and probes /livez and /readyz on the named port http', () => {
    const image = imageConfig();
    expect(values.ports).toEqual({ grpc: image.port, http: image.httpPort });
    expect(values.probes.startup.path).toBe('/livez');
    expect(values.probes.liveness.path).toBe('/livez');
    expect(values.probes.readiness.path).toBe('/readyz');
    const workload = read(`${CHART}/templates/workload.yaml`);
    expect(workload).toMatch(/- name: http\n\s+containerPort: \{\{ \.Values\.ports\.http \}\}/);
    expect(workload).toMatch(/- name: grpc\n\s+containerPort: \{\{ \.Values\.ports\.grpc \}\}/);
    const probePorts = [...workload.matchAll(/httpGet:\n\s+path: .*\n\s+port: (\S+)/g)].map((m) => m[1]);
    expect(probePorts).toEqual(['http', 'http', 'http']);
  });
});

describe('stop timeouts cover the SIGTERM hand-over', () => {
  it("the unit's TimeoutStopSec covers the example's shutdown-grace + max-resume-grace + 10 s", () => {
    const unit = read('deploy/systemd/lockstream.service');
    const config = configOf(yamlOf('deploy/systemd/lockstream.yaml'));
    const timeout = Number(/^TimeoutStopSec=(\d+)$/m.exec(unit)?.[1]);
    expect(config.onStop).toBe('hand-over');
    expect(timeout).toBeGreaterThanOrEqual((config.shutdownGraceMs + config.maxResumeGraceMs) / 1000 + 10);
    expect(unit).toMatch(/^KillSignal=SIGTERM$/m);
  });

  it("the chart's default grace period is worked out (null), the defaults' being 80 s", () => {
    // The chart adds them up itself (_helpers.tpl); check-deploy.sh checks that it refuses less.
    expect(values.terminationGracePeriodSeconds).toBeNull();
    const config = configOf(chartConfig(values.config));
    expect(values.preStopSleepSeconds + (config.shutdownGraceMs + config.maxResumeGraceMs) / 1000 + 10).toBe(
      80,
    );
  });
});

describe("docs/deployment.md's commands (the blocks marked `checked by test/unit/deploy-artifacts.test.ts`)", () => {
  const pkg = JSON.parse(read('package.json')) as { name: string; version: string };
  const commands = (name: string): string[] =>
    consoleCommands(checkedBlock('docs/deployment.md', name)).map(({ command }) => command);
  /** Every environment variable `serve` reads, from the options' descriptions. */
  const SERVE_ENV = new Set(
    serveOptions({}).map((option) => /\(env: (\w+)\)$/.exec(option.description)?.[1]),
  );

  it("docker-run: builds and runs this version's image, publishing the ports it exposes, with serve's variables", () => {
    const [build, ...runs] = commands('docker-run');
    expect(build).toBe(`docker build -t ${pkg.name}:${pkg.version} .`);
    const exposed = /^EXPOSE (.*)$/m.exec(read('Dockerfile'))![1]!.split(' ');
    expect(runs.length).toBeGreaterThan(0);
    for (const run of runs) {
      expect(run).toMatch(new RegExp(`^docker run .* ${pkg.name}:${pkg.version}$`));
      const published = [...run.matchAll(/-p \d+:(\d+)/g)].map((match) => match[1]);
      expect(published).toEqual(exposed);
      for (const [, variable] of run.matchAll(/-e (\w+)=/g)) expect(SERVE_ENV).toContain(variable);
    }
  });

  it("systemd-install: installs this version's package, and the unit and configuration files the repository has", () => {
    const [install, ...rest] = commands('systemd-install');
    expect(install).toBe(`npm install -g ${pkg.name}-${pkg.version}.tgz`);
    const unit = read('deploy/systemd/lockstream.service');
    // npm install -g puts the command in <prefix>/bin, /usr/local/bin with the usual prefix.
    expect(unit).toMatch(
      /^ExecStart=\/usr\/local\/bin\/lockstream serve --config \/etc\/lockstream\/lockstream\.yaml$/m,
    );
    const copied = rest.flatMap((command) =>
      command.startsWith('install ') ? [command.split(' ').slice(-2)] : [],
    );
    expect(copied).toEqual([
      ['deploy/systemd/lockstream.service', '/etc/systemd/system/'],
      ['deploy/systemd/lockstream.yaml', '/etc/lockstream/lockstream.yaml'],
    ]);
    for (const [source] of copied) expect(() => read(source!)).not.toThrow();
    expect(rest).toContain('systemctl daemon-reload && systemctl enable --now lockstream');
  });
});
