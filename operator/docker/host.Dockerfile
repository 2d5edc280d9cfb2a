# syntax=docker/dockerfile:1
# The host image, for host pods. Build from the repository root:
#   docker build -f operator/docker/host.Dockerfile -t tinyhost:dev .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY abi/go.mod abi/
COPY sdk/go.mod sdk/
RUN go mod download
COPY . .
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/tinyhost ./cmd/tinyhost

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tinyhost /tinyhost
USER 65532:65532
# gRPC. The host listens on 127.0.0.1 by default; in a pod, pass
# --listen=0.0.0.0:50051 (or TINYHOST_LISTEN) with TLS (--tls-cert) or a
# token (--token-file); the host refuses a non-loopback address with
# neither unless told --insecure.
EXPOSE 50051
ENTRYPOINT ["/tinyhost"]
