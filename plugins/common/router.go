package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tinyhost/tinyhost/sdk"
)

// routerOutputs is how many output ports the router declares: out1 to
// out8. Ports are declared statically in the descriptor, so routes name
// one of these, and the wiring gives each its destination.
const routerOutputs = 8

type routerSettings struct {
	Routes []struct {
		Port string `json:"port"`
		When string `json:"when"`
	} `json:"routes"`
	Default string `json:"default"`
}

type route struct {
	port string
	when cond
}

type routes struct {
	list []route
	def  string
}

var (
	routerSettingsCache = settings[routes]{compile: compileRoutes}
	routerPorts         = map[string]bool{}
	// routerRejected is why the last settings delivered were rejected; the
	// router keeps routing by the settings before them.
	routerRejected error
)

func compileRoutes(raw []byte) (routes, error) {
	var s routerSettings
	if err := decode(raw, &s); err != nil {
		return routes{}, err
	}
	var rs routes
	var errs []error
	for i, r := range s.Routes {
		if !routerPorts[r.Port] {
			errs = append(errs, fmt.Errorf("route %d: port %q: want one of out1 to out%d", i+1, r.Port, routerOutputs))
		}
		c, err := parseCond(r.When)
		if err != nil {
			errs = append(errs, fmt.Errorf("route %d: %w", i+1, err))
		}
		rs.list = append(rs.list, route{r.Port, c})
	}
	if s.Default != "" && !routerPorts[s.Default] {
		errs = append(errs, fmt.Errorf("default: port %q: want one of out1 to out%d", s.Default, routerOutputs))
	}
	rs.def = s.Default
	if len(errs) > 0 {
		return routes{}, fmt.Errorf("router settings: %w", errors.Join(errs...))
	}
	return rs, nil
}

type routed struct {
	Port string `json:"port"`
}

func routeMessage(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	rs, err := routerSettingsCache.get(ctx)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(payload, &doc); err != nil {
		return nil, fmt.Errorf("%w: router: the message is not JSON: %v", sdk.ErrBadRequest, err)
	}
	port := rs.def
	for _, r := range rs.list {
		if holds(r.when, doc) {
			port = r.port
			break
		}
	}
	if port == "" {
		if len(rs.list) == 0 {
			if routerRejected != nil {
				return nil, fmt.Errorf("router: no routes configured: %w", routerRejected)
			}
			return nil, errors.New(`router: no routes configured; set {"routes":[{"port":"out1","when":"$.x == 1"}],"default":"out2"}`)
		}
		return nil, errors.New("router: no route matched and no default port is set")
	}
	if err := ctx.Emit(port, payload); err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	return json.Marshal(routed{port})
}

func routerSettingsHandler(ctx *sdk.Context, _ string, payload []byte) ([]byte, error) {
	_, err := compileRoutes(payload)
	routerRejected = err
	return nil, err
}

func init() {
	ports := []sdk.Port{
		{Name: "in", Handle: routeMessage, Schema: `{"description":"any JSON message"}`},
		{Name: sdk.PortSettings, Handle: routerSettingsHandler},
	}
	for i := 1; i <= routerOutputs; i++ {
		name := "out" + strconv.Itoa(i)
		routerPorts[name] = true
		ports = append(ports, sdk.Port{Name: name, Direction: sdk.Output})
	}
	sdk.Register(module, sdk.Component{
		Name:        "router",
		Description: "Emits a message on the port of the first route whose condition holds, or on the default port",
		Tags:        []string{"flow"},
		Ports:       ports,
	})
}
