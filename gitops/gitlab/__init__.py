"""GitLab CI's front end (``gitops gitlab``, docs/gitlab-ci.md): :mod:`gitops.app.ci`'s policy on GitLab's variables,
the plan as one note on the merge request. It imports nothing of :mod:`gitops.github`: what they share is the policy."""
