// Command caddy is the gateway: Caddy with its standard modules, built as Caddy's own build
// tool builds it (a main module that requires Caddy), so `caddy version` names the release.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() {
	caddycmd.Main()
}
