# axgate: a static binary in a distroless image, run as a non-root user.
#
#   docker build -t axgate .
#   go run ./cmd/axgate keys gen --out deploy/keys   # deploy/keys/jwks.json verifies callers' tokens
#   docker run --rm --name axgate -p 8080:8080 -p 9090:9090 -v "$PWD/deploy:/etc/axgate:ro" axgate
#
# The image runs serve --config /etc/axgate/axgate.yaml: deploy/axgate.yaml,
# which enforces deploy/manifest.json in front of http://tools:9000 (edit
# upstream: to name your tool server). After editing the manifest,
# docker kill --signal HUP axgate reloads it (the image has no shell).
#
# The build context is the repository root: cmd/axgate builds in the go.work
# workspace with the library beside it.

FROM golang:1.26 AS build
WORKDIR /src
# Module files first, so that the download layer is reused while only code
# changes.
COPY go.work go.work.sum go.mod go.sum ./
COPY adapters/ adapters/
COPY bench/go.mod bench/go.sum bench/
COPY cmd/axgate/go.mod cmd/axgate/go.sum cmd/axgate/
COPY examples/ examples/
COPY gates/redisstore/go.mod gates/redisstore/go.sum gates/redisstore/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/axgate ./cmd/axgate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/axgate /usr/local/bin/axgate
# 65532 is distroless's nonroot user; numeric, so that Kubernetes can check
# runAsNonRoot.
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/axgate"]
CMD ["serve", "--config", "/etc/axgate/axgate.yaml"]
