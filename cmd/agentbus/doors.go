package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	wsdoor "github.com/agentbus/agentbus/doors/ws"
)

// doorConfig reads the limits of the WebSocket and local socket doors
// from the environment; unset variables keep the defaults.
func doorConfig() (wsdoor.Config, error) {
	var cfg wsdoor.Config
	var err error
	num := func(name string, set func(float64)) {
		if v := os.Getenv(name); v != "" && err == nil {
			f, perr := strconv.ParseFloat(v, 64)
			if perr != nil || f <= 0 {
				err = fmt.Errorf("%s=%q: want a positive number", name, v)
				return
			}
			set(f)
		}
	}
	dur := func(name string, set func(time.Duration)) {
		if v := os.Getenv(name); v != "" && err == nil {
			d, perr := time.ParseDuration(v)
			if perr != nil || d <= 0 {
				err = fmt.Errorf("%s=%q: want a positive duration such as 30s", name, v)
				return
			}
			set(d)
		}
	}
	num("AGENTBUS_DOOR_MAX_SESSIONS", func(f float64) { cfg.MaxSessions = int(f) })
	num("AGENTBUS_DOOR_RATE", func(f float64) { cfg.Rate = f })
	num("AGENTBUS_DOOR_BURST", func(f float64) { cfg.Burst = int(f) })
	dur("AGENTBUS_INPUT_ACK_TIMEOUT", func(d time.Duration) { cfg.InputAckTimeout = d })
	dur("AGENTBUS_WS_PING_INTERVAL", func(d time.Duration) { cfg.PingInterval = d })
	cfg.Config = cfg.Config.WithDefaults()
	return cfg, err
}
