# Sourced first by every bash step of action.yml (docs/github-action.md, threat model): no command of the checkout
# runs in the action's own steps. PATH loses each folder inside the workspace (a node_modules/.bin or a bin/ that a
# workflow added) and each relative entry (looked up from the working folder, the checkout); bash's table of
# commands found so far is forgotten. Shell start-up files (BASH_ENV, ENV) and NODE_OPTIONS are emptied by the
# steps' env:, before bash starts; Python runs with -I and, where the step allows it, from a folder made now.
_screeps_gitops_kept=""
IFS=: read -r -a _screeps_gitops_parts <<< "$PATH"
for _screeps_gitops_part in "${_screeps_gitops_parts[@]}"; do
  case "$_screeps_gitops_part" in
    "" | [!/]*) ;;
    "${GITHUB_WORKSPACE:-/-}" | "${GITHUB_WORKSPACE:-/-}"/*) ;;
    *) _screeps_gitops_kept="${_screeps_gitops_kept:+$_screeps_gitops_kept:}$_screeps_gitops_part" ;;
  esac
done
export PATH="$_screeps_gitops_kept"
unset _screeps_gitops_kept _screeps_gitops_parts _screeps_gitops_part
hash -r
