# syntax=docker/dockerfile:1
# switchboard's image: compiled with the dev dependencies, run with the production ones only, as
# the unprivileged `node` user. The entry is bin/switchboard (node with scripts/node-flags, exec'd:
# SIGTERM reaches the service); the command names the role: all (default), web, worker --pools=…,
# migrate (the release step) or an operator command (accounts:create …).
ARG NODE_VERSION=20

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
ENV SCARF_ANALYTICS=false
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY api ./api
COPY bin ./bin
COPY scripts ./scripts
COPY services ./services
COPY shared ./shared
COPY types ./types
COPY workers ./workers
RUN npm run build

FROM node:${NODE_VERSION}-bookworm-slim AS deps
WORKDIR /app
ENV SCARF_ANALYTICS=false
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production PORT=8080
WORKDIR /app
# Owned by root and read-only for the service's user: the running process cannot change its code.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY scripts/node-flags ./scripts/node-flags
COPY --chmod=0755 bin/switchboard ./bin/switchboard
USER node
EXPOSE 8080 9464
HEALTHCHECK --interval=10s --timeout=6s --start-period=60s --retries=3 CMD ["node", "dist/bin/healthcheck.js"]
ENTRYPOINT ["bin/switchboard"]
CMD ["all"]
