import torch, time, statistics
torch.manual_seed(0); torch.set_num_threads(2)
L=30
def run(f, reps=7):
    ts=[]
    for r in range(reps):
        t=time.perf_counter(); f(); ts.append((time.perf_counter()-t)/L*1e3)
    return statistics.median(ts[1:])
x=torch.randn(16,576)
q=[torch.randn(576,576) for _ in range(L)]; k=[torch.randn(192,576) for _ in range(L)]; v=[torch.randn(192,576) for _ in range(L)]
qkv=[torch.cat([a,b,c]) for a,b,c in zip(q,k,v)]
g=[torch.randn(1536,576) for _ in range(L)]; u=[torch.randn(1536,576) for _ in range(L)]
gu=[torch.cat([a,b]) for a,b in zip(g,u)]
mm=lambda W: torch.mm(W, x.T).T.contiguous()
print('qkv linear x3', run(lambda: [torch.nn.functional.linear(x,W) for l in range(L) for W in (q[l],k[l],v[l])]))
print('qkv W@xT x3', run(lambda: [mm(W) for l in range(L) for W in (q[l],k[l],v[l])]))
print('qkv fused W@xT', run(lambda: [mm(W) for W in qkv]))
print('qkv fused linear', run(lambda: [torch.nn.functional.linear(x,W) for W in qkv]))
print('gu linear x2', run(lambda: [torch.nn.functional.linear(x,W) for l in range(L) for W in (g[l],u[l])]))
print('gu W@xT x2', run(lambda: [mm(W) for l in range(L) for W in (g[l],u[l])]))
print('gu fused W@xT', run(lambda: [mm(W) for W in gu]))
print('eq', torch.equal(mm(qkv[0])[:, :576], mm(q[0])), torch.equal(mm(gu[0])[:, 1536:], mm(u[0])))
