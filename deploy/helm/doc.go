// Package helm holds the tests of herald's Helm chart (deploy/helm/herald). It is a module of
// its own, so that the Helm SDK and the Kubernetes API types stay out of herald's go.mod.
//
// The tests render the chart as `helm install --dry-run` does (the Helm SDK's install action,
// client only) for the value sets of testdata/, decode every object strictly into the types
// its API publishes (unknown fields fail), lint it with the SDK's linter, and check that
// the PrometheusRule carries the rules promtool tests (deploy/prometheus). Run them with
// `go -C deploy/helm test ./...` (`make test` does).
package helm
