# Multi-stage build of the one agentbus binary; every long-running
# component runs from this image with a different subcommand.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/agentbus ./cmd/agentbus

FROM alpine:3.20
# wget (busybox) serves the health checks of compose.yaml; bubblewrap and
# util-linux's prlimit make the sandbox each session's agent runs in.
RUN apk add --no-cache bubblewrap util-linux && adduser -D -H -u 10001 agentbus
COPY --from=build /out/agentbus /usr/local/bin/agentbus
USER agentbus
ENTRYPOINT ["/usr/local/bin/agentbus"]
