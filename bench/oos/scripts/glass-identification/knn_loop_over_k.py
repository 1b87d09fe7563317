# idiom: plain for-loop over k for KNeighborsClassifier with leave-one-out style cross_val_score, MinMaxScaler; intended: valid
import pandas as pd
from sklearn.model_selection import cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
X = train.drop(["id", "type"], axis=1)
y = train["type"]

results = []
for k in range(1, 16, 2):
    for weights in ("uniform", "distance"):
        knn = make_pipeline(MinMaxScaler(), KNeighborsClassifier(n_neighbors=k, weights=weights))
        acc = cross_val_score(knn, X, y, cv=5).mean()
        results.append((acc, k, weights))
        print(f"k={k:2d} {weights:8s} acc={acc:.3f}")

acc, k, weights = max(results)
print("chosen:", k, weights, round(acc, 3))
final = make_pipeline(MinMaxScaler(), KNeighborsClassifier(n_neighbors=k, weights=weights)).fit(X, y)
pd.DataFrame({"id": test["id"], "type": final.predict(test[X.columns])}).to_csv("submission.csv", index=False)
