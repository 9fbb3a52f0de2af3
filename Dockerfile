# syntax=docker/dockerfile:1
#
# The lockstream server: `docker build -t lockstream .` at the repository root.
#
#   docker run --rm -p 50051:50051 -p 9464:9464 lockstream        # embedded store, to try it
#   docker run --rm -p 50051:50051 -p 9464:9464 \
#     -e LOCKSTREAM_ZOOKEEPER=zk1:2181,zk2:2181,zk3:2181 lockstream # on ZooKeeper
#
# Three stages: `build` compiles the TypeScript with the dev dependencies, `deps` installs the
# production dependencies alone, and the last stage holds dist/, those node_modules and the
# default configuration, run as an unprivileged user. The native `zookeeper` addon (an optional
# peer dependency, the alternative ZooKeeper client) is NOT in the image: the default protocol
# client needs no native build, and only it can hand sessions over on SIGTERM (see
# docs/deployment.md). `--zookeeper-client addon` therefore fails at start in this image.
#
# The Node.js image is a build argument: the tests run on Node.js 20.
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: nothing native is built (the addon is a dev dependency here), and the
# `prepare` script's build waits for the sources below.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# The production dependencies only; the addon is an optional peer dependency, which npm leaves
# out unless asked for.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE}
LABEL org.opencontainers.image.title="lockstream" \
      org.opencontainers.image.description="A distributed lock server over gRPC (ZooKeeper or an embedded store)" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric id, so that Kubernetes' runAsNonRoot can check it without a name lookup.
RUN groupadd --system --gid 10001 lockstream \
 && useradd --system --uid 10001 --gid lockstream --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin lockstream
WORKDIR /app
ENV NODE_ENV=production
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
COPY proto ./proto
# Settings as a file rather than LOCKSTREAM_* variables, which would override a mounted file.
COPY deploy/docker/lockstream.yaml /etc/lockstream/lockstream.yaml
USER 10001:10001
# gRPC, then the HTTP port (page, /metrics, /livez, /readyz), as in the default configuration.
EXPOSE 50051 9464
# For `docker run` and Compose; Kubernetes ignores it and uses the chart's probes.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:9464/livez').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Node.js is PID 1: lockstream handles SIGTERM and SIGINT itself (the hand-over), and starts no
# child processes to reap. `docker run IMAGE lock NAME --server ...` runs the client commands.
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["serve", "--config", "/etc/lockstream/lockstream.yaml"]
