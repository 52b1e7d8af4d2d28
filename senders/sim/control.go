package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// routes wires the provider endpoints and the control API.
//
//	POST /v1/projects/{project}/messages:send    FCM v1
//	POST /token                                  OAuth2 token endpoint (JWT bearer grant)
//	POST /3/device/{token}                       APNs (use the TLS address: HTTP/2)
//	POST /2010-04-01/Accounts/{sid}/Messages.json Twilio
//	POST /sms/json                               Vonage SMS API
//	POST /v3/mail/send                           SendGrid v3 Mail Send
//	POST /webhook/...                            webhook receiver
//	GET  /records?provider=&since=&limit=        records as JSON
//	GET  /stats                                  per-provider counts and duplicates
//	POST /reset                                  forget every record
//	GET  /faults                                 current faults and latencies
//	PUT  /faults/{provider}                      {"rateLimit":0.1,"unavailable":0,"timeout":0,"permanent":0,"retryAfter":"2s"}
//	PUT  /latency/{provider}                     {"min":"1ms","median":"20ms","p99":"200ms"}
func (s *Sim) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/projects/{project}/messages:send", s.serveProvider(fcmProtocol()))
	mux.HandleFunc("POST /token", serveToken)
	mux.Handle("POST /3/device/{token}", s.serveProvider(apnsProtocol()))
	mux.Handle("POST /2010-04-01/Accounts/{sid}/Messages.json", s.serveProvider(twilioProtocol()))
	mux.Handle("POST /sms/json", s.serveProvider(vonageProtocol()))
	mux.Handle("POST /v3/mail/send", s.serveProvider(sendGridProtocol()))
	mux.Handle("POST /webhook/", s.serveProvider(webhookProtocol()))
	mux.HandleFunc("GET /records", s.serveRecords)
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Stats()) })
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /faults", s.serveGetFaults)
	mux.HandleFunc("PUT /faults/{provider}", s.servePutFaults)
	mux.HandleFunc("PUT /latency/{provider}", s.servePutLatency)
	return mux
}

func (s *Sim) serveRecords(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, _ := strconv.ParseInt(q.Get("since"), 10, 64)
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 {
		limit = 10_000
	}
	recs, dropped := s.records.list(q.Get("provider"), since, limit)
	next := since
	if len(recs) > 0 {
		next = recs[len(recs)-1].Seq
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": recs, "dropped": dropped, "next": next})
}

// jsonDuration reads "250ms"-style durations.
type jsonDuration time.Duration

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = jsonDuration(v)
	return err
}

func (d jsonDuration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

type faultsJSON struct {
	RateLimit   float64      `json:"rateLimit"`
	Unavailable float64      `json:"unavailable"`
	Timeout     float64      `json:"timeout"`
	Permanent   float64      `json:"permanent"`
	RetryAfter  jsonDuration `json:"retryAfter"`
}

type latencyJSON struct {
	Min    jsonDuration `json:"min"`
	Median jsonDuration `json:"median"`
	P99    jsonDuration `json:"p99"`
}

func knownProvider(p string) bool {
	for _, k := range Providers {
		if k == p {
			return true
		}
	}
	return false
}

func (s *Sim) serveGetFaults(w http.ResponseWriter, _ *http.Request) {
	faults, latency := s.dice.snapshot()
	out := map[string]any{}
	for _, p := range Providers {
		f, l := faults[p], latency[p]
		out[p] = map[string]any{
			"faults":  faultsJSON{f.RateLimit, f.Unavailable, f.Timeout, f.Permanent, jsonDuration(f.RetryAfter)},
			"latency": latencyJSON{jsonDuration(l.Min), jsonDuration(l.Median), jsonDuration(l.P99)},
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) servePutFaults(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("provider")
	var in faultsJSON
	if !knownProvider(p) || json.NewDecoder(r.Body).Decode(&in) != nil {
		http.Error(w, "unknown provider or bad JSON", http.StatusBadRequest)
		return
	}
	f := Faults{in.RateLimit, in.Unavailable, in.Timeout, in.Permanent, time.Duration(in.RetryAfter)}
	if err := s.SetFaults(p, f); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sim) servePutLatency(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("provider")
	var in latencyJSON
	if !knownProvider(p) || json.NewDecoder(r.Body).Decode(&in) != nil {
		http.Error(w, "unknown provider or bad JSON", http.StatusBadRequest)
		return
	}
	if err := s.SetLatency(p, Latency{time.Duration(in.Min), time.Duration(in.Median), time.Duration(in.P99)}); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
