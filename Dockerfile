# syntax=docker/dockerfile:1

# ---- build ----
FROM golang:1.26 AS build
WORKDIR /src

# Module downloads are cached as long as go.mod/go.sum do not change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/gatehouse ./cmd/web

# ---- run ----
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gatehouse /gatehouse
USER nonroot:nonroot
ENV GATEHOUSE_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/gatehouse"]
CMD ["serve"]
