# syntax=docker/dockerfile:1
# xds-server and the example backend, built from this repository.
#
#   docker build -t xds-server .                           # the server (last stage, the default)
#   docker build --target backend -t xds-server-backend .  # the example backend
#
# examples/docker-compose.yaml builds both.

FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -o /out/xds-server ./cmd/xds-server \
 && go build -trimpath -o /out/backend ./examples/backend

# The example backend: gRPC + HTTP, registers itself in Consul, lame duck on SIGTERM.
FROM gcr.io/distroless/static-debian12:nonroot AS backend
COPY --from=build /out/backend /usr/local/bin/backend
ENTRYPOINT ["/usr/local/bin/backend"]

# xds-server, with the example configurations under /app/examples (relative
# paths in them resolve from /app).
FROM gcr.io/distroless/static-debian12:nonroot AS xds-server
WORKDIR /app
COPY --from=build /out/xds-server /usr/local/bin/xds-server
COPY examples /app/examples
# ADS (Envoy, gRPC), rate-limit service (RLS v3), admin HTTP.
EXPOSE 18000 18081 19000
ENTRYPOINT ["/usr/local/bin/xds-server"]
CMD ["--config", "examples/envoy/xds-server.yaml"]
