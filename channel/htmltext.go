package channel

import (
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// htmlToText reads an HTML-only mail as a browser would (golang.org/x/net/html's tokenizer, so
// an attribute, a comment or a script holding "<" or ">" is never taken for text), keeping the
// sender's words: no head, style or script; no quoted history (blockquote, and everything from
// a Gmail or Thunderbird quote on); a line break for <br> and at the end of a block. Entities
// are decoded. The agent needs the words, not the layout.
func htmlToText(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	skip := 0  // depth inside head, style, script, title, template, noscript
	quote := 0 // depth inside blockquote
	for {
		switch z.Next() {
		case html.ErrorToken:
			return b.String() // io.EOF, or a token longer than the tokenizer takes: what was read
		case html.TextToken:
			if skip == 0 && quote == 0 {
				b.Write(z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			if a == atom.Div && hasAttr && isQuoteDiv(z) {
				return b.String() // the quoted history runs to the end of the mail
			}
			switch a {
			case atom.Head, atom.Style, atom.Script, atom.Title, atom.Template, atom.Noscript:
				skip++
			case atom.Blockquote:
				quote++
			case atom.Br:
				if skip == 0 && quote == 0 {
					b.WriteByte('\n')
				}
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch atom.Lookup(name) {
			case atom.Head, atom.Style, atom.Script, atom.Title, atom.Template, atom.Noscript:
				skip = max(skip-1, 0)
			case atom.Blockquote:
				quote = max(quote-1, 0)
			case atom.P, atom.Div, atom.Li, atom.Tr, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
				if skip == 0 && quote == 0 {
					b.WriteByte('\n')
				}
			}
		}
	}
}

// isQuoteDiv reports a div whose class marks the quoted original (gmail_quote, moz-cite-prefix).
func isQuoteDiv(z *html.Tokenizer) bool {
	for {
		k, v, more := z.TagAttr()
		if string(k) == "class" && (strings.Contains(string(v), "gmail_quote") || strings.Contains(string(v), "moz-cite-prefix")) {
			return true
		}
		if !more {
			return false
		}
	}
}
