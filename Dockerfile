# syntax=docker/dockerfile:1
# One image for all three roles; the first argument picks one:
#   docker run dtp coordinator [flags] | worker [flags] | client <command> [flags]
# See docs/OPERATIONS.md.

# ---- build: compile TypeScript and the better-sqlite3 native module ----------
FROM node:24-bookworm-slim AS build

# better-sqlite3 is a native addon: when no prebuilt binary matches, npm ci
# compiles it, which needs python3, make and a C++ compiler.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 make g++ \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app

# Behind a proxy that re-signs TLS, npm must trust that proxy's certificate
# authority: hand the file in as a build secret and name it with this build
# argument (unset, nothing changes):
#   docker build --secret id=extra_ca,src=/path/to/ca.pem \
#     --build-arg NODE_EXTRA_CA_CERTS=/run/secrets/extra_ca -t dtp .
ARG NODE_EXTRA_CA_CERTS=
# When no prebuilt better-sqlite3 binary can be downloaded, node-gyp compiles
# it against the headers of this image's own Node.js instead of downloading
# them.
ENV npm_config_nodedir=/usr/local

# Dependencies first: this layer is reused as long as the lock file is unchanged.
COPY package.json package-lock.json ./
RUN --mount=type=secret,id=extra_ca npm ci --no-audit --no-fund

COPY tsconfig.json ./
COPY src ./src
COPY scripts ./scripts
COPY ui ./ui
RUN npm run build \
    && npm prune --omit=dev --no-audit --no-fund

# ---- runtime -----------------------------------------------------------------
FROM node:24-bookworm-slim

# Flags fall back to DTP_* variables: the coordinator keeps its database on
# the /data volume unless --database says otherwise.
ENV NODE_ENV=production \
    DTP_DATABASE=/data/coordinator.db

# openssl: `docker-entrypoint.sh init-secrets` makes the compose file's
# certificate with it on first start.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openssl \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app

# The application stays owned by root (read-only for the process); only the
# data directory belongs to the unprivileged `node` user of the base image.
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/scripts ./scripts
RUN mkdir -p /data /secrets && chown node:node /data /secrets

USER node
VOLUME ["/data", "/secrets"]

# 7070 workers, 7071 clients, 9464 /metrics and /healthz (with --metrics-port 9464).
EXPOSE 7070 7071 9464

# No HEALTHCHECK here: only the coordinator serves /healthz, and the same
# image runs workers. docker-compose.yml sets one on the coordinator service
# (`docker-entrypoint.sh healthcheck`).
ENTRYPOINT ["/app/scripts/docker-entrypoint.sh"]
CMD ["coordinator"]
