package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// telemetry owns the process's OpenTelemetry providers and its Prometheus registry.
type telemetry struct {
	metrics  http.Handler
	shutdown func(context.Context) error
}

// setupTelemetry installs global trace and metric providers configured by the standard
// OTEL_* variables:
//
//   - Traces are always recorded by the SDK (every notification gets a trace id, stored as
//     its traceparent). They are exported as OTEL_TRACES_EXPORTER says; when it is unset,
//     to OTLP if an OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set, and nowhere otherwise, so a
//     process without a collector does not log export errors forever.
//   - Metrics are served in Prometheus format on /metrics, and pushed as well when
//     OTEL_METRICS_EXPORTER names an exporter.
//   - Sampling follows OTEL_TRACES_SAMPLER; the resource follows OTEL_SERVICE_NAME and
//     OTEL_RESOURCE_ATTRIBUTES (service.name defaults to "herald").
func setupTelemetry(ctx context.Context, version string) (*telemetry, error) {
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceVersion(version),
	))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	if os.Getenv("OTEL_SERVICE_NAME") == "" {
		res, _ = resource.Merge(res, resource.NewSchemaless(semconv.ServiceName("herald")))
	}
	res, err = resource.Merge(res, resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}

	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if exportTraces() {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("trace exporter: %w", err)
		}
		if !autoexport.IsNoneSpanExporter(exp) {
			topts = append(topts, sdktrace.WithBatcher(exp))
		}
	}
	tp := sdktrace.NewTracerProvider(topts...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	promReader, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(promReader)}
	if os.Getenv("OTEL_METRICS_EXPORTER") != "" && os.Getenv("OTEL_METRICS_EXPORTER") != "prometheus" {
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			return nil, fmt.Errorf("metric exporter: %w", err)
		}
		if !autoexport.IsNoneMetricReader(r) {
			mopts = append(mopts, sdkmetric.WithReader(r))
		}
	}
	mp := sdkmetric.NewMeterProvider(mopts...)
	otel.SetMeterProvider(mp)

	return &telemetry{
		metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		shutdown: func(ctx context.Context) error {
			return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx))
		},
	}, nil
}

// exportTraces reports whether the environment asks for trace export: OTEL_TRACES_EXPORTER
// set, or an OTLP endpoint given.
func exportTraces() bool {
	for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}
