# idiom: StandardScaler applied to the target as well as the features, MLPRegressor; intended: wrong (predictions stay standardised, inverse_transform never called)
import pandas as pd
from sklearn.neural_network import MLPRegressor
from sklearn.preprocessing import StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

drop = ["id", "avg_price_per_room", "arrival_date", "agent", "company", "country"]
X = pd.get_dummies(train.drop(columns=drop), dtype=float)
X_test = pd.get_dummies(test.drop(columns=[c for c in drop if c in test.columns]), dtype=float)
X_test = X_test.reindex(columns=X.columns, fill_value=0.0)

x_scaler = StandardScaler()
y_scaler = StandardScaler()
X_s = x_scaler.fit_transform(X)
y_s = y_scaler.fit_transform(train[["avg_price_per_room"]]).ravel()

mlp = MLPRegressor(hidden_layer_sizes=(64, 32), alpha=1e-3, max_iter=300, early_stopping=True, random_state=0)
mlp.fit(X_s, y_s)
print("validation R2 (scaled):", mlp.best_validation_score_)

pred = mlp.predict(x_scaler.transform(X_test))
pd.DataFrame({"id": test["id"], "avg_price_per_room": pred}).to_csv("submission.csv", index=False)
