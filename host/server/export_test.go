package server

import (
	"github.com/tinyhost/tinyhost/host"
	"github.com/tinyhost/tinyhost/host/api"
	"github.com/tinyhost/tinyhost/host/hostv1"
)

// Methods are the full names of every method s serves, of every service.
func (s *Server) Methods() []string {
	var out []string
	for svc, info := range s.grpc.GetServiceInfo() {
		for _, m := range info.Methods {
			out = append(out, "/"+svc+"/"+m.Name)
		}
	}
	return out
}

// MethodRoles is the table of the role each method needs; "" is open.
func MethodRoles() map[string]api.Role { return methodRoles }

// ModuleProto is the conversion of a module for the wire, and the fields
// it had to change.
func ModuleProto(m *host.ModuleInfo) (*hostv1.Module, []string) { return moduleProto(m) }

// MaxOpenCalls is how many calls without a credential run at once.
const MaxOpenCalls = maxOpenCalls

// OnRoomWait has f told how many requests a stream took when its reader
// begins to wait for it to hold less; nil stops it.
func OnRoomWait(f func(taken int)) { roomWait = f }
