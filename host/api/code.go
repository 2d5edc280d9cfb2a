package api

// Code is the gRPC status code of an error, by number: the values are
// google.golang.org/grpc/codes's, which package host/hostv1 converts to,
// so that the vocabulary says which code each error has without linking
// gRPC.
type Code uint32

// The codes the host's errors have (a subset of gRPC's).
const (
	CodeOK                 Code = 0
	CodeCanceled           Code = 1
	CodeUnknown            Code = 2
	CodeInvalidArgument    Code = 3
	CodeDeadlineExceeded   Code = 4
	CodeNotFound           Code = 5
	CodePermissionDenied   Code = 7
	CodeResourceExhausted  Code = 8
	CodeFailedPrecondition Code = 9
	CodeAborted            Code = 10
	CodeInternal           Code = 13
	CodeUnavailable        Code = 14
	CodeDataLoss           Code = 15
	CodeUnauthenticated    Code = 16
)
