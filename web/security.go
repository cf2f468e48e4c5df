package web

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// The security rules, in the order secure applies them. The pages show text an agent wrote
// (and an agent reads untrusted text), and the API wakes and cancels chambers, so:
//
//   - every response forbids what the pages never need: inline script and style, any other
//     origin, framing, sniffing, caching, a Referer;
//   - a request over TCP must name this server as its Host (a loopback name and our port), so a
//     web page that rebinds its own host name to 127.0.0.1 gets nothing;
//   - every request carries the token: in its URL (?token=, which every link and form of the
//     pages carries on), or in the X-Cryo-Token (or Authorization: Bearer) header. Never in a
//     cookie: browsers send a host's cookies to every port of it (RFC 6265 §8.5), so any program
//     listening on 127.0.0.1 that the operator visits, an agent's own server included, would
//     receive it. The Referrer-Policy keeps the URL from leaving in a Referer;
//   - a POST, the only method that changes anything, must carry the token in a header, which
//     another site's page cannot add without our permission (CORS preflight, never granted),
//     must come from our own origin when the browser says where it comes from, and must be
//     JSON.

// TokenHeader is the header that carries the token in a script or a POST.
const TokenHeader = "X-Cryo-Token"

// contentSecurityPolicy allows the page's own script, style and requests and nothing else: no
// inline script or style (so no markup an agent could smuggle in would run), no images or
// frames from anywhere, no forms posting elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (s *Server) secure(h http.Handler) http.Handler {
	h = s.track(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")

		if !s.hostAllowed(r) {
			s.deny(w, r, http.StatusMisdirectedRequest, "this server answers only to its own address (a loopback name and its port)", "open the URL that `cryochamber web` printed")
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodPost:
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			s.deny(w, r, http.StatusMethodNotAllowed, "method not allowed", "")
			return
		}
		header := headerToken(r)
		inURL := ""
		if q := r.URL.Query(); q.Has("token") {
			inURL = q.Get("token")
			if !s.tokenOK(inURL) && !s.tokenOK(header) {
				s.deny(w, r, http.StatusUnauthorized, "wrong token", "open the URL that `cryochamber web` printed (or `cryochamber web --url`)")
				return
			}
		}
		if !s.tokenOK(header) && !s.tokenOK(inURL) {
			s.deny(w, r, http.StatusUnauthorized, "no valid token", "open the URL that `cryochamber web` printed (or `cryochamber web --url`), or send the token in the "+TokenHeader+" header")
			return
		}
		if r.Method == http.MethodPost {
			if why := s.postRefused(r, header); why != "" {
				s.deny(w, r, http.StatusForbidden, why, "changes are made by the dashboard's own page, or by a client that sends the token in the "+TokenHeader+" header")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		h.ServeHTTP(w, r)
	})
}

// maxBody bounds a POST body: a message is at most 1 MiB, and JSON may escape every byte of it
// as \u00XX (6 bytes).
const maxBody = 7 << 20

func headerToken(r *http.Request) string {
	if t := r.Header.Get(TokenHeader); t != "" {
		return t
	}
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(a)
	}
	return ""
}

func (s *Server) tokenOK(t string) bool {
	return t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) == 1
}

// crossOrigin refuses a request a browser sent from another origin (net/http's
// CrossOriginProtection, with no trusted origin and no bypass).
var crossOrigin = http.NewCrossOriginProtection()

// postRefused says why a POST that carries a valid token somewhere is still refused, or "".
func (s *Server) postRefused(r *http.Request, header string) string {
	if !s.tokenOK(header) {
		return "a change needs the token in the " + TokenHeader + " header (a URL alone could come from another site's form)"
	}
	// The Go team's check (Sec-Fetch-Site, else Origin against Host); the rest only words why.
	if crossOrigin.Check(r) != nil {
		switch o, site := r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"); {
		case site != "" && site != "same-origin" && site != "none":
			return "the browser says the request comes from another site (" + site + ")"
		case o == "null":
			return "the request comes from an opaque origin"
		default:
			return "the request comes from another origin (" + o + ")"
		}
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return "the body must be JSON (Content-Type: application/json)"
	}
	return ""
}

// hostAllowed checks the Host header of a request that came over TCP: a loopback name or
// address, and the port the request arrived on. A request over the Unix socket cannot come
// from a web page, and names no meaningful host.
func (s *Server) hostAllowed(r *http.Request) bool {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local != nil && local.Network() == "unix" {
		return true
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		return false
	}
	switch strings.ToLower(host) {
	case "localhost", "127.0.0.1", "::1":
	default:
		return false
	}
	if ta, ok := local.(*net.TCPAddr); ok {
		_, lport, _ := net.SplitHostPort(ta.String())
		return port == lport
	}
	return local == nil
}
