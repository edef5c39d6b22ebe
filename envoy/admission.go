package envoy

import (
	"cmp"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	admissionv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/admission_control/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Defaults of AdmissionControl's zero fields, Envoy's own defaults made
// explicit in what we send.
const (
	defaultSuccessRateThreshold    = 0.95
	defaultAggression              = 1.0
	defaultSamplingWindow          = 30 * time.Second
	defaultMaxRejectionProbability = 0.8
)

// admissionProto translates ac for the listener named name. Every value is
// also a runtime key, "admission_control.<listener>.<field>", so an
// operator can tune it in Envoy's runtime without a config change.
//
// The SRE book's client-side throttling (ch. 21) rejects with probability
// max(0, (requests - K*accepts) / (requests + 1)); Envoy's filter with
// max(0, (n - s/sr_threshold) / (n + 1)) ^ (1/aggression). With
// aggression 1 they are the same for sr_threshold = 1/K: the caller maps
// K to SuccessRateThreshold. Successes are Envoy's defaults: HTTP status
// below 500, and gRPC statuses other than the server-side failures.
func admissionProto(name string, ac AdmissionControl) *admissionv3.AdmissionControl {
	key := func(field string) string { return "admission_control." + name + "." + field }
	percent := func(fraction float64) *typev3.Percent { return &typev3.Percent{Value: 100 * fraction} }
	return &admissionv3.AdmissionControl{
		Enabled: &corev3.RuntimeFeatureFlag{DefaultValue: wrapperspb.Bool(true), RuntimeKey: key("enabled")},
		EvaluationCriteria: &admissionv3.AdmissionControl_SuccessCriteria_{
			SuccessCriteria: &admissionv3.AdmissionControl_SuccessCriteria{},
		},
		SamplingWindow: durationpb.New(cmp.Or(ac.SamplingWindow, defaultSamplingWindow)),
		Aggression:     &corev3.RuntimeDouble{DefaultValue: cmp.Or(ac.Aggression, defaultAggression), RuntimeKey: key("aggression")},
		SrThreshold: &corev3.RuntimePercent{
			DefaultValue: percent(cmp.Or(ac.SuccessRateThreshold, defaultSuccessRateThreshold)), RuntimeKey: key("sr_threshold"),
		},
		RpsThreshold: &corev3.RuntimeUInt32{DefaultValue: ac.RPSThreshold, RuntimeKey: key("rps_threshold")},
		MaxRejectionProbability: &corev3.RuntimePercent{
			DefaultValue: percent(cmp.Or(ac.MaxRejectionProbability, defaultMaxRejectionProbability)),
			RuntimeKey:   key("max_rejection_probability"),
		},
	}
}
