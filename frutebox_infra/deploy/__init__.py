"""The deploy contract: the requests the Pulumi program hands the deploy step (pod, seed and
volume requests as RunPod v2 bodies), and how a plan is rendered into them."""
