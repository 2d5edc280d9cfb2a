package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// tokenAuth checks the bearer token of every call except the health
// service's Check: readiness probes and load balancers rarely carry
// credentials, and Check answers only SERVING or not for a name the caller
// already knows. List names every loaded module and Watch follows one, so
// they need the token like the host service.
type tokenAuth struct {
	sum [sha256.Size]byte
}

func (a *tokenAuth) check(ctx context.Context, method string) error {
	if method == grpc_health_v1.Health_Check_FullMethodName {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return status.Error(codes.Unauthenticated, `missing bearer token: send the metadata "authorization: Bearer <token>"`)
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return status.Error(codes.Unauthenticated, `malformed authorization: want "Bearer <token>"`)
	}
	// Comparing digests keeps the comparison constant-time in the token's
	// length too.
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(sum[:], a.sum[:]) != 1 {
		return status.Error(codes.Unauthenticated, "invalid bearer token")
	}
	return nil
}

func (a *tokenAuth) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (a *tokenAuth) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

func newTokenAuth(token string) *tokenAuth {
	return &tokenAuth{sum: sha256.Sum256([]byte(token))}
}
