package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of the operator's resources.
const Group = "operator.tinysystems.io"

// GroupVersion is the group and version of this package's resources.
var GroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

var (
	// SchemeBuilder registers this package's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&TinyModule{}, &TinyModuleList{},
		&TinyHost{}, &TinyHostList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
