# shellcheck shell=bash
# Source me: `source tools/env.sh`. The one place that sets the hermetic Pulumi
# environment for local runs; tests and bench scripts get it from here too
# (frutebox_infra/toolchain.hermetic_env sources this file in bash and reads
# the result). Needs nothing but bash: it runs before any .venv exists.
#
# - PATH starts with .tools/bin and PULUMI_HOME is .tools/pulumi-home, only
#   when our toolchain has been built (tools/setup-toolchain); otherwise the
#   user's pulumi and PULUMI_HOME are left alone.
# - PULUMI_BACKEND_URL defaults to the git-ignored local file backend
#   file://$ROOT/.pulumi-state; a value already set (a team backend) is kept.
# - PULUMI_CONFIG_PASSPHRASE defaults to the documented local default
#   "frutebox-local" only for a file:// backend inside the checkout, and only
#   when neither PULUMI_CONFIG_PASSPHRASE nor PULUMI_CONFIG_PASSPHRASE_FILE is set.
# - No update checks and no plugin downloads (our machines cannot reach them).
# - PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK is removed: the Automation API's
#   real CLI version check must pass.
# - FRUTEBOX_PYTHON points at the project's .venv interpreter when it exists.

_frutebox_env() {
  local root tools_bin backend path
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
  tools_bin="$root/.tools/bin"

  if [[ -x "$tools_bin/pulumi" ]]; then
    case ":$PATH:" in
      ":$tools_bin:"*) ;;
      *) PATH="$tools_bin${PATH:+:$PATH}" ;;
    esac
    export PATH
    export PULUMI_HOME="$root/.tools/pulumi-home"
  fi

  if [[ -z "${PULUMI_BACKEND_URL:-}" ]]; then
    mkdir -p "$root/.pulumi-state"
    export PULUMI_BACKEND_URL="file://$root/.pulumi-state"
  fi

  backend="$PULUMI_BACKEND_URL"
  if [[ "$backend" == file://* && -z "${PULUMI_CONFIG_PASSPHRASE+x}" \
        && -z "${PULUMI_CONFIG_PASSPHRASE_FILE+x}" ]]; then
    path="${backend#file://}"
    path="${path%/}"
    if [[ "$path" == "$root" || "$path" == "$root"/* ]]; then
      export PULUMI_CONFIG_PASSPHRASE="frutebox-local"
    fi
  fi

  export PULUMI_SKIP_UPDATE_CHECK=true
  export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
  unset PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK

  if [[ -x "$root/.venv/bin/python" ]]; then
    export FRUTEBOX_PYTHON="$root/.venv/bin/python"
  fi
}
_frutebox_env
unset -f _frutebox_env
