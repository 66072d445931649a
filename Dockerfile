# syntax=docker/dockerfile:1
# Build: docker build --build-arg VERSION=$(git describe --always) -t flowbridge .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The same static build CI checks: no cgo, trimmed paths.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/flowbridge ./cmd/flowbridge

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/flowbridge /flowbridge
# The store lives on a volume; point [store] path at /data/flowbridge.db.
VOLUME /data
WORKDIR /data
ENV FLOWBRIDGE_CONFIG=/etc/flowbridge/flowbridge.toml
USER nonroot:nonroot
EXPOSE 9090
# Healthy means serving: /readyz, which fails while the store cannot write
# (with the reason) or a platform is disconnected, not /healthz, which only
# says the process answers. Docker does not restart an unhealthy container;
# the status is for operators and orchestrators to see.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s CMD ["/flowbridge", "health", "-ready"]
ENTRYPOINT ["/flowbridge"]
CMD ["run"]
