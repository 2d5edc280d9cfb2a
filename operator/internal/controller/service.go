package controller

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/tinyhost/tinyhost/operator/api/v1alpha1"
)

// ServicePort is the port of every TinyModule's Service; its endpoints
// are the ports the hosts listen on.
const ServicePort = 50051

// ManagedBy is the endpointslice.kubernetes.io/managed-by of the
// EndpointSlices the operator writes, so that Kubernetes' own EndpointSlice
// controller leaves them alone.
const ManagedBy = "tinyhost-operator.operator.tinysystems.io"

// reasonServiceConflict: a Service of the module's name exists and is not
// the TinyModule's.
const reasonServiceConflict = "ServiceConflict"

// services gives each TinyModule a headless Service of its name, without
// a selector, and EndpointSlices listing the addresses of its Ready
// placements, as Tiny Systems modules are reached through a Service. Both
// are controlled by the TinyModule (owner references), so that they go
// with it. It writes no status: the module status publishes the Service's
// address.
type services struct {
	client.Client
	events recorder.EventRecorder
}

func (r *services) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var m v1alpha1.TinyModule
	if err := r.Get(ctx, req.NamespacedName, &m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !m.DeletionTimestamp.IsZero() || !serviceable(&m) {
		return ctrl.Result{}, nil
	}
	own, err := r.service(ctx, &m)
	if err != nil || !own {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.slices(ctx, &m)
}

// serviceable: the module's name can name a Service (a DNS-1035 label),
// and the module has placements (a module that lost a name conflict has
// none).
func serviceable(m *v1alpha1.TinyModule) bool {
	return len(validation.IsDNS1035Label(m.Name)) == 0 && len(m.Status.Placements) > 0
}

// serviceAddress is the in-cluster address of the module's Service.
func serviceAddress(m *v1alpha1.TinyModule) string {
	return net.JoinHostPort(m.Name+"."+m.Namespace+".svc", strconv.Itoa(ServicePort))
}

// service creates or updates the module's Service; own is false when a
// Service of that name belongs to something else, which is left alone.
func (r *services) service(ctx context.Context, m *v1alpha1.TinyModule) (own bool, err error) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
	err = r.Get(ctx, client.ObjectKeyFromObject(svc), svc)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, err
	case !metav1.IsControlledBy(svc, m):
		r.events.Eventf(m, nil, corev1.EventTypeWarning, reasonServiceConflict, "Publish",
			"Service %s/%s exists and is not this TinyModule's: left alone; status.address names a host instead", m.Namespace, m.Name)
		return false, nil
	}
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
		if svc.Labels == nil {
			svc.Labels = map[string]string{}
		}
		svc.Labels["app.kubernetes.io/managed-by"] = "tinyhost-operator"
		svc.Labels[v1alpha1.GroupVersion.Group+"/module"] = m.Name
		svc.Spec.Selector = nil
		if svc.CreationTimestamp.IsZero() {
			// Headless (RATIONALE: why a headless Service); a clusterIP
			// cannot change, so a Service made with one keeps it.
			svc.Spec.ClusterIP = corev1.ClusterIPNone
		}
		svc.Spec.Ports = []corev1.ServicePort{{Name: "grpc", Protocol: corev1.ProtocolTCP, Port: ServicePort,
			TargetPort: intstr.FromString("grpc"), AppProtocol: ptr("grpc")}}
		return controllerutil.SetControllerReference(m, svc, r.Scheme())
	})
	if err != nil {
		return false, fmt.Errorf("TinyModule %s/%s: Service: %w", m.Namespace, m.Name, err)
	}
	if op != controllerutil.OperationResultNone {
		logf.FromContext(ctx).V(1).Info("Service "+string(op), "service", m.Name)
	}
	return true, nil
}

// slices makes the module's EndpointSlices those of its Ready placements:
// one per address type and port, named after the module, the type and the
// port.
func (r *services) slices(ctx context.Context, m *v1alpha1.TinyModule) error {
	want, skipped := endpointSlices(m)
	if len(skipped) > 0 {
		logf.FromContext(ctx).V(1).Info("placements left out of the EndpointSlices", "why", skipped)
	}
	var have discoveryv1.EndpointSliceList
	if err := r.List(ctx, &have, client.InNamespace(m.Namespace), client.MatchingLabels{
		discoveryv1.LabelServiceName: m.Name, discoveryv1.LabelManagedBy: ManagedBy,
	}); err != nil {
		return err
	}
	for i := range have.Items {
		s := &have.Items[i]
		if _, ok := want[s.Name]; !ok && metav1.IsControlledBy(s, m) {
			if err := r.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("TinyModule %s/%s: delete EndpointSlice %s: %w", m.Namespace, m.Name, s.Name, err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w := want[name]
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: name}}
		_, err := controllerutil.CreateOrUpdate(ctx, r.Client, s, func() error {
			if s.Labels == nil {
				s.Labels = map[string]string{}
			}
			s.Labels[discoveryv1.LabelServiceName] = m.Name
			s.Labels[discoveryv1.LabelManagedBy] = ManagedBy
			s.AddressType, s.Endpoints, s.Ports = w.AddressType, w.Endpoints, w.Ports
			return controllerutil.SetControllerReference(m, s, r.Scheme())
		})
		if err != nil {
			return fmt.Errorf("TinyModule %s/%s: EndpointSlice %s: %w", m.Namespace, m.Name, name, err)
		}
	}
	return nil
}

// endpointSlices are the EndpointSlices of the module's Ready placements,
// by name, and what could not be listed in one, said for the log: an
// address an EndpointSlice refuses (loopback, link-local, unspecified, or
// a host name that is not fully qualified).
func endpointSlices(m *v1alpha1.TinyModule) (map[string]*discoveryv1.EndpointSlice, []string) {
	out := map[string]*discoveryv1.EndpointSlice{}
	var skipped []string
	for _, p := range m.Status.Placements {
		if p.Phase != v1alpha1.PhaseReady || p.Address == "" {
			continue
		}
		host, portStr, err := net.SplitHostPort(p.Address)
		port, perr := strconv.ParseInt(portStr, 10, 32)
		if err != nil || perr != nil {
			skipped = append(skipped, fmt.Sprintf("host %s: address %q is not host:port", p.Host, p.Address))
			continue
		}
		typ, why := endpointAddressType(host)
		if why != "" {
			skipped = append(skipped, fmt.Sprintf("host %s: address %s cannot be an endpoint: %s", p.Host, p.Address, why))
			continue
		}
		name := fmt.Sprintf("%s-%s-%d", m.Name, strings.ToLower(string(typ)), port)
		s := out[name]
		if s == nil {
			s = &discoveryv1.EndpointSlice{AddressType: typ, Ports: []discoveryv1.EndpointPort{{
				Name: ptr("grpc"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(port)), AppProtocol: ptr("grpc"),
			}}}
			out[name] = s
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{host},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
			TargetRef:  &corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TinyHost", Name: p.Host},
		})
	}
	return out, skipped
}

// endpointAddressType is the EndpointSlice address type of a host, or why
// it cannot be an endpoint, as the apiserver validates it.
func endpointAddressType(host string) (discoveryv1.AddressType, string) {
	ip := net.ParseIP(host)
	if ip == nil {
		if errs := validation.IsFullyQualifiedDomainName(nil, host); len(errs) > 0 {
			return "", errs.ToAggregate().Error()
		}
		return discoveryv1.AddressTypeFQDN, ""
	}
	switch {
	case ip.IsLoopback(), ip.IsUnspecified(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "", "loopback, unspecified and link-local addresses are refused"
	case ip.To4() != nil:
		return discoveryv1.AddressTypeIPv4, ""
	}
	return discoveryv1.AddressTypeIPv6, ""
}

// publishService makes the module's published address its Service's, once
// a replica is Ready (st.Address is then a host's), unless its name cannot
// name a Service or a Service of that name is not the module's: then a
// host's address stays.
func (r *modules) publishService(ctx context.Context, m *v1alpha1.TinyModule, st *v1alpha1.TinyModuleStatus) error {
	if st.Address == "" || len(validation.IsDNS1035Label(m.Name)) > 0 {
		return nil
	}
	var svc corev1.Service
	err := r.Get(ctx, client.ObjectKeyFromObject(m), &svc)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case !metav1.IsControlledBy(&svc, m):
		return nil
	}
	st.Address = serviceAddress(m)
	return nil
}
