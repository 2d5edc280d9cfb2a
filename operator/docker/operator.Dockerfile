# syntax=docker/dockerfile:1
# The operator image. Build from the repository root:
#   docker build -f operator/docker/operator.Dockerfile -t tinyhost-operator:dev .
FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a code change does not download them again. The
# root module replaces abi and sdk with ./abi and ./sdk.
COPY go.mod go.sum ./
COPY abi/go.mod abi/
COPY sdk/go.mod sdk/
RUN go mod download
COPY . .
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/tinyhost-operator ./cmd/tinyhost-operator

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tinyhost-operator /tinyhost-operator
USER 65532:65532
ENTRYPOINT ["/tinyhost-operator"]
