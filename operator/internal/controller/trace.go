package controller

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The attributes of a reconcile's span.
const (
	AttrController = attribute.Key("tinyhost.controller")
	AttrNamespace  = attribute.Key("k8s.namespace.name")
	AttrName       = attribute.Key("tinyhost.object")
	AttrRequeue    = attribute.Key("tinyhost.requeue_after_ms")
)

// traced is r, each reconcile in a span of its own when o has a
// TracerProvider: the gRPC calls it makes to hosts, traced by the client's
// stats handler, are its children.
func traced(o Options, controller string, r reconcile.Reconciler) reconcile.Reconciler {
	if o.TracerProvider == nil {
		return r
	}
	return tracedReconciler{r: r, tr: o.TracerProvider.Tracer("github.com/tinyhost/tinyhost/operator"), name: "reconcile " + controller, controller: AttrController.String(controller)}
}

type tracedReconciler struct {
	r          reconcile.Reconciler
	tr         trace.Tracer
	name       string
	controller attribute.KeyValue
}

func (t tracedReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ctx, sp := t.tr.Start(ctx, t.name, trace.WithAttributes(t.controller, AttrNamespace.String(req.Namespace), AttrName.String(req.Name)))
	defer sp.End()
	res, err := t.r.Reconcile(ctx, req)
	if res.RequeueAfter > 0 {
		sp.SetAttributes(AttrRequeue.Int64(res.RequeueAfter.Milliseconds()))
	}
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	return res, err
}
